//! The parser's input: chunks of one file cut into lines (a big chunk's first stage run on a
//! second thread meanwhile, see `stage.rs`), and the files of `strace -ff` merged by timestamp as
//! `strace-log-merge` does (each file a source, read in the order the merge asks for).

use super::*;

impl StraceParser {
    pub(super) fn feed_single(&mut self, chunk: &[u8]) {
        let max = self.cfg.max_line;
        if chunk.is_empty() {
            let s = &mut self.sources[0];
            s.eof = true;
            s.done = true;
            self.need.clear();
            if s.skipping {
                s.skipping = false;
            } else if !s.buf.is_empty() {
                let buf = std::mem::take(&mut s.buf);
                self.line(0, &buf);
                self.sources[0].buf = buf;
                self.sources[0].buf.clear();
            }
            return;
        }
        let mut rest = chunk;
        if self.sources[0].skipping {
            match memchr::memchr(b'\n', rest) {
                Some(nl) => {
                    self.sources[0].skipping = false;
                    rest = &rest[nl + 1..];
                }
                None => return,
            }
        }
        if !self.sources[0].buf.is_empty() {
            match memchr::memchr(b'\n', rest) {
                Some(nl) => {
                    let mut buf = std::mem::take(&mut self.sources[0].buf);
                    if buf.len() + nl > max {
                        self.sources[0].line += 1;
                        self.overlong(0);
                    } else {
                        buf.extend_from_slice(&rest[..nl]);
                        self.line(0, &buf);
                    }
                    buf.clear();
                    self.sources[0].buf = buf;
                    rest = &rest[nl + 1..];
                }
                None => {
                    let s = &mut self.sources[0];
                    if s.buf.len() + rest.len() > max {
                        s.buf.clear();
                        s.skipping = true;
                        s.line += 1;
                        self.overlong(0);
                    } else {
                        s.buf.extend_from_slice(rest);
                    }
                    return;
                }
            }
        }
        let pos = match memchr::memrchr(b'\n', rest) {
            Some(nl) => nl + 1,
            None => 0,
        };
        let lines = &rest[..pos];
        if lines.len() >= PARALLEL_MIN {
            // A second thread does stage A (the stateless split and argument parse, ~1/3
            // of the work) for all but the first tenth of the chunk, part by part, while
            // this one runs both stages on that tenth, then stage B on each part as it
            // arrives: this thread does little more than stage B.
            let at = lines.len() / 10;
            let cut = memchr::memchr(b'\n', &lines[at..]).map_or(lines.len(), |nl| at + nl + 1);
            let (near, far) = lines.split_at(cut);
            // Joins made by the second thread are checked against addresses of this chunk only.
            for p in self.pending.iter_mut() {
                p.from = 0;
            }
            let src_pid = self.sources[0].pid;
            // Parts' buffers go back to the second thread once stage B is done with them, and
            // to the next chunk after this one: a fresh ~1 MB vector per part was written to
            // new pages (a fifth of the import's page faults, `perf record -e page-faults`; the
            // parse of the 3M-line many-process log alone, `examples/strace_speed.rs`: 28-32K
            // -> 19K minor faults, system time 0.18-0.26 -> 0.11-0.19 s, 3 runs each, load 4.7).
            let (back_tx, back_rx) = std::sync::mpsc::channel::<Spare<'_>>();
            for s in std::mem::take(&mut self.spare) {
                let _ = back_tx.send(s.relive());
            }
            let spare = std::thread::scope(|scope| {
                // Bounded: at most a few parts of pre-parsed lines are held.
                let (tx, rx) = std::sync::mpsc::sync_channel::<Spare<'_>>(2);
                let worker = scope.spawn(move || {
                    let mut rest = far;
                    let mut pairs = PreJoin::new(src_pid);
                    while !rest.is_empty() {
                        let end = if rest.len() <= PART {
                            rest.len()
                        } else {
                            memchr::memchr(b'\n', &rest[PART..]).map_or(rest.len(), |nl| PART + nl + 1)
                        };
                        let (part, next) = rest.split_at(end);
                        rest = next;
                        let Spare { pres: mut out, mut arena } = back_rx.try_recv().unwrap_or_default();
                        out.reserve(part.len() / 64);
                        let mut p = 0;
                        for nl in memchr::memchr_iter(b'\n', part) {
                            let l = &part[p..nl];
                            out.push(None);
                            if l.len() <= max {
                                let slot = out.last_mut().expect("just pushed");
                                let x = pre_into(l, slot);
                                pairs.see(x, &mut arena);
                            }
                            p = nl + 1;
                        }
                        if tx.send(Spare { pres: out, arena }).is_err() {
                            return back_rx;
                        }
                    }
                    back_rx
                });
                self.lines_single(near);
                for Spare { mut pres, mut arena } in rx {
                    for p in &pres {
                        match p {
                            Some(p) => self.line_pre(0, p),
                            None => {
                                self.sources[0].line += 1;
                                self.overlong(0);
                            }
                        }
                    }
                    pres.clear(); // (its joined calls borrow from the arena)
                    arena.reset();
                    let _ = back_tx.send(Spare { pres, arena });
                }
                match worker.join() {
                    Ok(back_rx) => back_rx.try_iter().take(SPARE).map(Spare::relive).collect(),
                    Err(e) => std::panic::resume_unwind(e),
                }
            });
            self.spare = spare;
        } else {
            self.lines_single(lines);
        }
        let tail = &rest[pos..];
        if tail.len() > max {
            self.sources[0].skipping = true;
            self.sources[0].line += 1;
            self.overlong(0);
        } else {
            self.sources[0].buf.extend_from_slice(tail);
        }
    }

    /// Rejects the overlong line just counted in source `src`.
    /// Every line of `lines` (complete lines, each ending with a newline) of source 0.
    pub(super) fn lines_single(&mut self, lines: &[u8]) {
        let max = self.cfg.max_line;
        let mut pos = 0;
        for nl in memchr::memchr_iter(b'\n', lines) {
            let l = &lines[pos..nl];
            if l.len() > max {
                self.sources[0].line += 1;
                self.overlong(0);
            } else {
                self.line(0, l);
            }
            pos = nl + 1;
        }
    }

    pub(super) fn overlong(&mut self, src: usize) {
        self.stats.lines += 1;
        let line = self.sources[src].line;
        let reason = format!("line longer than {} bytes", self.cfg.max_line);
        self.reject_at(src, line, reason);
    }

    pub(super) fn feed_merge(&mut self, src: usize, chunk: &[u8]) {
        let max = self.cfg.max_line;
        let s = &mut self.sources[src];
        if s.done {
            return;
        }
        if chunk.is_empty() {
            s.eof = true;
        } else {
            if s.start > 0 {
                s.buf.drain(..s.start);
                s.start = 0;
            }
            s.buf.extend_from_slice(chunk);
        }
        // A line that cannot end within `max_line` bytes is skipped as it streams in.
        loop {
            let s = &mut self.sources[src];
            if s.skipping {
                match memchr::memchr(b'\n', &s.buf[s.start..]) {
                    Some(nl) => {
                        s.start += nl + 1;
                        s.skipping = false;
                    }
                    None => {
                        s.buf.clear();
                        s.start = 0;
                        break;
                    }
                }
            } else if memchr::memchr(b'\n', &s.buf[s.start..]).is_none() && s.buf.len() - s.start > max {
                s.buf.clear();
                s.start = 0;
                s.skipping = true;
                s.line += 1;
                self.overlong(src);
            } else {
                break;
            }
        }
        if let Some(k) = self.need.iter().position(|&i| i as usize == src) {
            self.need.remove(k);
            self.queue(src);
        }
        self.pump();
    }

    /// Puts source `src` in the heap (its next line is complete), in `need`, or done.
    pub(super) fn queue(&mut self, src: usize) {
        let s = &mut self.sources[src];
        let avail = &s.buf[s.start..];
        let line = match memchr::memchr(b'\n', avail) {
            Some(nl) => &avail[..nl],
            None if s.eof && !avail.is_empty() => avail,
            None if s.eof => {
                s.done = true;
                return;
            }
            None => {
                self.need.push(src as u32);
                return;
            }
        };
        // Order by the line's own stamp; a line without one keeps its place in its file.
        let ts = match split_line(line) {
            Ok((p, _)) => match p.stamp {
                Stamp::Epoch(t) => Some(t),
                Stamp::Tod(t) => Some(tod_adjust(&mut s.day, s.last_ts, t)),
                Stamp::None => None,
            },
            Err(_) => None,
        };
        let key = ts.unwrap_or(s.last_ts);
        s.next_ts = ts;
        self.heap.push(Reverse((key, src as u32)));
    }

    /// Processes lines in timestamp order while every source has its next line (as
    /// `strace-log-merge` does: each `-ff` file is one thread, stamped at syscall entry).
    pub(super) fn pump(&mut self) {
        while self.need.is_empty() {
            let Some(Reverse((_, src))) = self.heap.pop() else { break };
            let src = src as usize;
            let s = &mut self.sources[src];
            let avail = &s.buf[s.start..];
            let (len, adv) = match memchr::memchr(b'\n', avail) {
                Some(nl) => (nl, nl + 1),
                None => (avail.len(), avail.len()),
            };
            let buf = std::mem::take(&mut s.buf);
            let start = s.start;
            self.line(src, &buf[start..start + len]);
            let s = &mut self.sources[src];
            s.buf = buf;
            s.start = start + adv;
            self.queue(src);
        }
    }
}
