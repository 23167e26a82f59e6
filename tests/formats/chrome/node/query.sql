-- Node.js's own trace of a small script: X slices and B/E pairs matched per thread, exact ns from
-- the file's microseconds; args become typed columns (arg_filename of a B, end_arg_* of its E).
SELECT name, phase, ts, dur, arg_filename, "end_arg_bytesRead", "end_arg_bytesWritten"
FROM golden.slice
ORDER BY ts, name
