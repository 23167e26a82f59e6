//! The write load generator: many agents writing line protocol (or ready-made bodies)
//! to a server, measuring what was sent, what was acknowledged and how long that took.
//!
//! Owns the workloads ([`Workload::Qos`]: the Qosmet agents of seed 003, 13 measurement-id
//! tags + 48 result fields per row; [`Workload::Cpu`]: TSBS cpu-only, 10 tags + 10 fields),
//! the wire protocols ([`Proto`]: HTTP line protocol, TCP line protocol with or without
//! durable-offset acknowledgements, HTTP with caller-supplied bodies such as Arrow IPC),
//! and the report ([`Report`]: rows/s sent and acknowledged, ack latency and end-to-end
//! latency percentiles, errors).
//!
//! Decisions:
//! - One OS thread per agent with blocking sockets (small stacks): an agent is a closed
//!   loop (send a batch, wait for its acknowledgement, sleep until its next interval),
//!   exactly the seed's writing clients, and 1,000 of them are 1,000 threads of 256 KiB.
//! - Text is never formatted on the hot path: each agent pre-renders its tag section and
//!   a pool of field sections (realistic values, drawn once); a batch is memcpy of those
//!   plus the decimal timestamp. Generating 250K QoS rows/s then costs a fraction of a
//!   core, leaving the CPU to the server it measures (both share this machine).
//! - End-to-end latency follows the thesis's `edited_time`: each row's timestamp is its
//!   scheduled measurement time; acknowledgement time minus that is the end-to-end delay,
//!   which grows when an agent falls behind its interval (the writing module's buffer).
//! - Pure Rust and no Python: the PyO3 wrapper (`py/loadgen.rs`) runs [`run`] with the
//!   GIL released.
//!
//! Over 600 lines: the two workloads (QoS agents, TSBS cpu-only), the sending threads and
//! the report share one schedule and one set of counters.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::workload::rng::SplitMix64;

/// The 13 measurement-id parameters of a Qosmet measurement (seed 003, schema 2's id table).
pub const QOS_ID_PARAMS: [&str; 13] = [
    "customerId",
    "userId",
    "controllerId",
    "serviceId",
    "serviceMapIdAddr",
    "serviceMapIdPort",
    "callerMapIdAddr",
    "callerMapIdPort",
    "2serviceMapIdAddr",
    "2serviceMapIdPort",
    "measurementId",
    "measurementStartTime",
    "measurementEndTime",
];

/// The 48 result parameters of a Qosmet average-stats row (seed 003 lists the first 13 of
/// schema 1; the rest follow Qosmet's documented measures: delay, jitter, loss, duplicates,
/// reordering, load, throughput, packet sizes, connection breaks, RTT, QoE estimates).
pub const QOS_RESULTS: [(&str, GenSpec); 48] = [
    ("ctrl_pk_num", GenSpec::I(0, 65535)),
    ("meas_duration", GenSpec::F(0.05, 0.05)),
    ("ul_delay", GenSpec::F(0.0, 500.0)),
    ("dl_delay", GenSpec::F(0.0, 500.0)),
    ("ul_d_samples", GenSpec::I(0, 100)),
    ("dl_d_samples", GenSpec::I(0, 100)),
    ("ul_jitter", GenSpec::F(0.0, 50.0)),
    ("dl_jitter", GenSpec::F(0.0, 50.0)),
    ("ul_ave_jitter", GenSpec::F(0.0, 20.0)),
    ("dl_ave_jitter", GenSpec::F(0.0, 20.0)),
    ("ul_pk_loss", GenSpec::F(0.0, 5.0)),
    ("dl_pk_loss", GenSpec::F(0.0, 5.0)),
    ("ul_dupl", GenSpec::I(0, 500)),
    ("dl_dupl", GenSpec::I(0, 500)),
    ("ul_reorder", GenSpec::I(0, 50)),
    ("dl_reorder", GenSpec::I(0, 50)),
    ("ul_load", GenSpec::F(0.0, 100_000.0)),
    ("dl_load", GenSpec::F(0.0, 100_000.0)),
    ("ul_throughput", GenSpec::F(0.0, 1_000_000.0)),
    ("dl_throughput", GenSpec::F(0.0, 1_000_000.0)),
    ("ul_pk_count", GenSpec::I(0, 10_000)),
    ("dl_pk_count", GenSpec::I(0, 10_000)),
    ("ul_bytes", GenSpec::I(0, 15_000_000)),
    ("dl_bytes", GenSpec::I(0, 15_000_000)),
    ("ul_pk_size_min", GenSpec::I(40, 512)),
    ("ul_pk_size_max", GenSpec::I(512, 1500)),
    ("ul_pk_size_avg", GenSpec::F(40.0, 1500.0)),
    ("dl_pk_size_min", GenSpec::I(40, 512)),
    ("dl_pk_size_max", GenSpec::I(512, 1500)),
    ("dl_pk_size_avg", GenSpec::F(40.0, 1500.0)),
    ("ul_breaks", GenSpec::I(0, 5)),
    ("dl_breaks", GenSpec::I(0, 5)),
    ("ul_break_dur", GenSpec::F(0.0, 1000.0)),
    ("dl_break_dur", GenSpec::F(0.0, 1000.0)),
    ("ul_max_break", GenSpec::F(0.0, 1000.0)),
    ("dl_max_break", GenSpec::F(0.0, 1000.0)),
    ("ul_delay_min", GenSpec::F(0.0, 100.0)),
    ("ul_delay_max", GenSpec::F(100.0, 1000.0)),
    ("dl_delay_min", GenSpec::F(0.0, 100.0)),
    ("dl_delay_max", GenSpec::F(100.0, 1000.0)),
    ("rtt", GenSpec::F(0.0, 1000.0)),
    ("rtt_min", GenSpec::F(0.0, 200.0)),
    ("rtt_max", GenSpec::F(200.0, 2000.0)),
    ("mos", GenSpec::F(1.0, 5.0)),
    ("r_factor", GenSpec::F(0.0, 100.0)),
    ("qoe_class", GenSpec::I(1, 5)),
    ("sample_count", GenSpec::I(1, 1000)),
    ("clock_offset", GenSpec::F(-10.0, 10.0)),
];

/// A value range, public face of [`Gen`].
#[derive(Clone, Copy, Debug)]
pub enum GenSpec {
    /// Float uniform in [lo, hi).
    F(f64, f64),
    /// Integer uniform in [lo, hi].
    I(i64, i64),
}

/// TSBS cpu-only tag names (10) and field names (10).
pub const CPU_TAGS: [&str; 10] = [
    "hostname",
    "region",
    "datacenter",
    "rack",
    "os",
    "arch",
    "team",
    "service",
    "service_version",
    "service_environment",
];
/// TSBS cpu-only fields (integers 0..100, written with the `i` suffix as TSBS does).
pub const CPU_FIELDS: [&str; 10] = [
    "usage_user",
    "usage_system",
    "usage_idle",
    "usage_nice",
    "usage_iowait",
    "usage_irq",
    "usage_softirq",
    "usage_steal",
    "usage_guest",
    "usage_guest_nice",
];

/// What the agents write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Seed 003's Qosmet agents: measurement `qos`, 13 id tags, 48 result fields.
    Qos,
    /// TSBS cpu-only: measurement `cpu`, 10 tags, 10 fields.
    Cpu,
}

/// How the agents talk to the server.
#[derive(Clone, Debug)]
pub enum Proto {
    /// `POST path` with a line-protocol body; 2xx acknowledges the batch.
    Http {
        /// Request path and query, e.g. `/api/v2/write?bucket=qos`.
        path: String,
    },
    /// Line protocol over TCP, opened by the tracehouse handshake (a comment line naming the
    /// bucket and token). `acks`: ask for and wait for the durable offset (`ok <line>`) of each
    /// batch; without, batches are only sent.
    Tcp {
        /// Wait for durable offsets (tracehouse only; implies `handshake`).
        acks: bool,
        /// Open with the handshake (off for other servers, e.g. QuestDB, that may not take comments).
        handshake: bool,
        /// Bucket named in the handshake.
        bucket: String,
    },
    /// `POST path` with bodies supplied by the caller, used in turn (e.g. Arrow IPC);
    /// `rows` rows per body.
    HttpBodies {
        /// Request path and query.
        path: String,
        /// The bodies.
        bodies: Arc<Vec<Vec<u8>>>,
        /// Content type header.
        content_type: String,
        /// Byte offset of each body's `ts` values (int64 little-endian, one per row), if any:
        /// each send then stamps its rows with the send's measurement time (`ts + k * 1 µs`,
        /// as the line-protocol rows are), instead of repeating the bodies' own stamps.
        ts_offsets: Option<Arc<Vec<usize>>>,
    },
}

/// One load run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Workload.
    pub workload: Workload,
    /// Wire protocol.
    pub proto: Proto,
    /// Server address.
    pub host: String,
    /// Server port.
    pub port: u16,
    /// `Authorization: Token ...` (HTTP) / handshake token (TCP).
    pub token: Option<String>,
    /// Concurrent agents (connections, threads).
    pub agents: usize,
    /// Rows per batch (request).
    pub rows_per_batch: usize,
    /// Milliseconds between an agent's batches (0: as fast as acknowledgements allow).
    pub interval_ms: f64,
    /// Seconds to run.
    pub duration_s: f64,
    /// Stop each agent after this many batches (0: no limit).
    pub batches_per_agent: u64,
    /// Seed of the values.
    pub seed: u64,
    /// Distinct field sections pre-rendered per agent.
    pub pool: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            workload: Workload::Qos,
            proto: Proto::Http { path: "/api/v2/write?bucket=qos".into() },
            host: "127.0.0.1".into(),
            port: 8086,
            token: None,
            agents: 8,
            rows_per_batch: 1000,
            interval_ms: 0.0,
            duration_s: 10.0,
            batches_per_agent: 0,
            seed: 42,
            pool: 64,
        }
    }
}

/// What a run measured.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Wall time from the first connection to the last agent's end, seconds.
    pub elapsed_s: f64,
    /// Rows written to sockets.
    pub rows_sent: u64,
    /// Rows acknowledged (HTTP 2xx, TCP durable offsets; TCP without acks: 0).
    pub rows_acked: u64,
    /// Batches written.
    pub batches_sent: u64,
    /// Batches acknowledged.
    pub batches_acked: u64,
    /// Failed requests (non-2xx, refused lines, connection errors).
    pub errors: u64,
    /// Non-2xx statuses seen, with counts.
    pub statuses: Vec<(u16, u64)>,
    /// First error messages (at most 10).
    pub error_samples: Vec<String>,
    /// Acknowledgement latency (send → ack), microseconds: p50, p90, p99, max.
    pub ack_us: [u64; 4],
    /// End-to-end latency (scheduled measurement time → ack), microseconds: p50, p90, p99, max.
    pub e2e_us: [u64; 4],
    /// Bytes written.
    pub bytes_sent: u64,
}

#[derive(Default)]
struct AgentStats {
    rows_sent: u64,
    rows_acked: u64,
    batches_sent: u64,
    batches_acked: u64,
    errors: u64,
    statuses: Vec<(u16, u64)>,
    samples: Vec<String>,
    ack_us: Vec<u32>,
    e2e_us: Vec<u32>,
    bytes: u64,
}

impl AgentStats {
    fn error(&mut self, msg: String) {
        self.errors += 1;
        if self.samples.len() < 3 {
            self.samples.push(msg);
        }
    }
    fn status(&mut self, s: u16) {
        match self.statuses.iter_mut().find(|(k, _)| *k == s) {
            Some((_, n)) => *n += 1,
            None => self.statuses.push((s, 1)),
        }
    }
}

/// Tag section (`,k=v...`) of agent `i`, with the measurement name in front.
pub fn tag_section(workload: Workload, agent: usize, seed: u64) -> String {
    let mut r = SplitMix64::new(seed ^ (agent as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    match workload {
        Workload::Qos => {
            // Customers as in the thesis's test data: a few big ones, many small ones.
            let customer = 1 + (agent % 556);
            let vals: [String; 13] = [
                customer.to_string(),
                (1 + r.below(1000)).to_string(),
                (1 + r.below(16)).to_string(),
                (1 + r.below(64)).to_string(),
                (0x0A00_0000u32 | r.below(1 << 24)).to_string(),
                (1024 + r.below(60_000)).to_string(),
                (0xC0A8_0000u32 | r.below(1 << 16)).to_string(),
                (1024 + r.below(60_000)).to_string(),
                (0x0A00_0000u32 | r.below(1 << 24)).to_string(),
                (1024 + r.below(60_000)).to_string(),
                (agent + 1).to_string(),
                format!("{:.3}", 1.7e9 + f64::from(r.below(86_400))),
                "0".to_string(),
            ];
            let mut s = String::from("qos");
            for (k, v) in QOS_ID_PARAMS.iter().zip(vals) {
                s.push(',');
                s.push_str(k);
                s.push('=');
                s.push_str(&v);
            }
            s
        }
        Workload::Cpu => {
            const REGIONS: [&str; 9] = [
                "us-east-1",
                "us-west-1",
                "us-west-2",
                "eu-west-1",
                "eu-central-1",
                "ap-southeast-1",
                "ap-southeast-2",
                "ap-northeast-1",
                "sa-east-1",
            ];
            const OS: [&str; 3] = ["Ubuntu16.10", "Ubuntu16.04LTS", "Ubuntu15.10"];
            const TEAM: [&str; 4] = ["SF", "NYC", "LON", "CHI"];
            const ENV: [&str; 3] = ["production", "staging", "test"];
            let region = REGIONS[r.below(9) as usize];
            let dc = ["a", "b", "c"][r.below(3) as usize];
            format!(
                "cpu,hostname=host_{agent},region={region},datacenter={region}{dc},rack={},os={},arch={},team={},service={},service_version={},service_environment={}",
                r.below(100),
                OS[r.below(3) as usize],
                ["x64", "x86"][r.below(2) as usize],
                TEAM[r.below(4) as usize],
                r.below(20),
                r.below(2),
                ENV[r.below(3) as usize]
            )
        }
    }
}

/// One field section (` k=v,...`, with the leading space) of `workload`.
pub fn field_section(workload: Workload, r: &mut SplitMix64) -> String {
    let mut s = String::with_capacity(800);
    s.push(' ');
    match workload {
        Workload::Qos => {
            for (i, (name, spec)) in QOS_RESULTS.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                s.push_str(name);
                s.push('=');
                match *spec {
                    GenSpec::F(lo, hi) => {
                        let u = (r.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                        s.push_str(&format!("{:.3}", lo + u * (hi - lo)));
                    }
                    GenSpec::I(lo, hi) => {
                        let span = (hi - lo + 1) as u64;
                        s.push_str(&format!("{}i", lo + (r.next_u64() % span) as i64));
                    }
                }
            }
        }
        Workload::Cpu => {
            for (i, name) in CPU_FIELDS.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                s.push_str(&format!("{name}={}i", r.below(101)));
            }
        }
    }
    s
}

/// Overwrites `rows` int64 values at `at` with `ts + k * 1000` (k = 0..rows), where they fit.
fn stamp(body: &mut [u8], at: usize, rows: usize, ts: i64) {
    let end = at.saturating_add(rows * 8).min(body.len());
    for (k, v) in body[at.min(end)..end].chunks_exact_mut(8).enumerate() {
        v.copy_from_slice(&(ts + k as i64 * 1000).to_le_bytes());
    }
}

/// Writes `v` in decimal.
fn push_i64(out: &mut Vec<u8>, v: i64) {
    let mut buf = [0u8; 20];
    let mut n = v.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[i..]);
}

fn now_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

struct Agent {
    id: usize,
    cfg: Arc<Config>,
    tags: Vec<u8>,
    fields: Vec<Vec<u8>>,
    next_field: usize,
    /// TSBS-style rows carry their own clock (10 s per row and host); QoS rows the wall clock.
    line_no: u64,
}

impl Agent {
    fn new(id: usize, cfg: Arc<Config>) -> Self {
        let mut r = SplitMix64::new(cfg.seed.wrapping_add(id as u64 * 7919));
        let tags = tag_section(cfg.workload, id, cfg.seed).into_bytes();
        let fields = (0..cfg.pool.max(1)).map(|_| field_section(cfg.workload, &mut r).into_bytes()).collect();
        Self { id, cfg, tags, fields, next_field: id, line_no: 0 }
    }

    /// A batch of `rows` lines, all stamped around `ts` (1 µs apart, so rows stay distinct).
    fn render(&mut self, out: &mut Vec<u8>, rows: usize, ts: i64) {
        out.clear();
        for k in 0..rows {
            out.extend_from_slice(&self.tags);
            let f = &self.fields[self.next_field % self.fields.len()];
            self.next_field = self.next_field.wrapping_add(1);
            out.extend_from_slice(f);
            out.push(b' ');
            push_i64(out, ts + k as i64 * 1000);
            out.push(b'\n');
        }
    }
}

fn connect(cfg: &Config) -> io::Result<TcpStream> {
    let addr = (cfg.host.as_str(), cfg.port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"))?;
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    s.set_write_timeout(Some(Duration::from_secs(60)))?;
    Ok(s)
}

/// Reads one HTTP response; returns (status, keep-alive, body).
fn read_response(r: &mut BufReader<TcpStream>) -> io::Result<(u16, bool, Vec<u8>)> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"));
    }
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("bad status line {line:?}")))?;
    let mut len = 0usize;
    let mut keep = true;
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed in headers"));
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            let k = k.trim().to_ascii_lowercase();
            if k == "content-length" {
                len = v.trim().parse().unwrap_or(0);
            } else if k == "connection" && v.trim().eq_ignore_ascii_case("close") {
                keep = false;
            }
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    Ok((status, keep, body))
}

fn run_agent(mut agent: Agent, start: Instant, stop: Arc<AtomicBool>) -> AgentStats {
    let cfg = agent.cfg.clone();
    let mut st = AgentStats::default();
    let deadline = start + Duration::from_secs_f64(cfg.duration_s);
    let interval = Duration::from_secs_f64(cfg.interval_ms.max(0.0) / 1000.0);
    // Agents start spread over one interval, like independent measurement agents.
    let offset = if cfg.agents > 0 { interval.mul_f64(agent.id as f64 / cfg.agents as f64) } else { Duration::ZERO };
    let mut next = start + offset;
    let mut body: Vec<u8> = Vec::with_capacity(cfg.rows_per_batch * (agent.tags.len() + 900));
    let mut head: Vec<u8> = Vec::with_capacity(256);
    let mut conn: Option<(TcpStream, BufReader<TcpStream>)> = None;
    let mut batches = 0u64;
    let mut tcp_line: u64 = 0; // last line number sent on this TCP connection
    let mut ack_buf: Vec<u8> = Vec::new();
    let wall0 = now_ns();
    while !stop.load(Ordering::Relaxed) {
        if cfg.batches_per_agent > 0 && batches >= cfg.batches_per_agent {
            break;
        }
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        if !interval.is_zero() && next > now {
            thread::sleep((next - now).min(deadline - now));
            if Instant::now() >= deadline {
                break;
            }
        }
        let scheduled = if interval.is_zero() { Instant::now() } else { next };
        next += interval;
        let sched_ns = wall0 + scheduled.duration_since(start).as_nanos() as i64;
        if conn.is_none() {
            match connect(&cfg) {
                Ok(s) => {
                    let r = BufReader::new(s.try_clone().expect("clone socket"));
                    let mut s = s;
                    if let Proto::Tcp { acks, handshake: true, bucket } = &cfg.proto {
                        // The handshake is a comment line to any other line-protocol parser; it
                        // names the bucket and token at most once too (without it a token server
                        // refuses the connection and the lines go to its default bucket).
                        let tok = cfg.token.as_ref().map(|t| format!(" token={t}")).unwrap_or_default();
                        let mode = if *acks { "acks=1 " } else { "" };
                        if s.write_all(format!("# tracehouse {mode}bucket={bucket}{tok}\n").as_bytes()).is_err() {
                            st.error("handshake failed".into());
                            thread::sleep(Duration::from_millis(100));
                            continue;
                        }
                        tcp_line = 1;
                    } else {
                        tcp_line = 0;
                    }
                    conn = Some((s, r));
                }
                Err(e) => {
                    st.error(format!("connect: {e}"));
                    thread::sleep(Duration::from_millis(100));
                    continue;
                }
            }
        }
        let rows = cfg.rows_per_batch;
        let ts = match cfg.workload {
            Workload::Qos => sched_ns,
            // TSBS: one reading per host every 10 s of simulated time, from 2016-01-01.
            Workload::Cpu => 1_451_606_400_000_000_000 + (agent.line_no as i64) * 10_000_000_000,
        };
        let (s, r) = conn.as_mut().expect("connected");
        let sent_at = Instant::now();
        let result: io::Result<Option<u16>> = match &cfg.proto {
            Proto::Http { path } => {
                agent.render(&mut body, rows, ts);
                http_post(s, r, &mut head, &cfg, path, "text/plain; charset=utf-8", &body).map(Some)
            }
            Proto::HttpBodies { path, bodies, content_type, ts_offsets } => {
                let i = (batches as usize + agent.id) % bodies.len();
                body.clear();
                body.extend_from_slice(&bodies[i]);
                if let Some(offs) = ts_offsets {
                    stamp(&mut body, offs[i], rows, ts);
                }
                http_post(s, r, &mut head, &cfg, path, content_type, &body).map(Some)
            }
            Proto::Tcp { acks, .. } => {
                agent.render(&mut body, rows, ts);
                match s.write_all(&body) {
                    Ok(()) => {
                        tcp_line += rows as u64;
                        if *acks {
                            wait_tcp_ack(r, tcp_line, &mut ack_buf, &mut st).map(|()| Some(200))
                        } else {
                            Ok(None)
                        }
                    }
                    Err(e) => Err(e),
                }
            }
        };
        agent.line_no += rows as u64;
        batches += 1;
        match result {
            Ok(status) => {
                st.batches_sent += 1;
                st.rows_sent += rows as u64;
                st.bytes += body.len() as u64 + head.len() as u64;
                match status {
                    Some(code) if (200..300).contains(&code) => {
                        let done = Instant::now();
                        st.batches_acked += 1;
                        st.rows_acked += rows as u64;
                        st.ack_us.push(done.duration_since(sent_at).as_micros().min(u32::MAX as u128) as u32);
                        st.e2e_us
                            .push(done.saturating_duration_since(scheduled).as_micros().min(u32::MAX as u128) as u32);
                    }
                    Some(code) => {
                        st.status(code);
                        st.error(format!("HTTP {code}"));
                        if code == 503 || code == 429 {
                            thread::sleep(Duration::from_millis(100)); // Retry-After, scaled down
                        }
                    }
                    None => {}
                }
            }
            Err(e) => {
                st.error(format!("{e}"));
                conn = None;
            }
        }
    }
    if let Some((s, mut r)) = conn {
        if matches!(cfg.proto, Proto::Tcp { .. }) {
            let _ = s.shutdown(Shutdown::Write);
            let mut sink = Vec::new();
            let _ = r.read_to_end(&mut sink);
        }
    }
    st
}

fn http_post(
    s: &mut TcpStream,
    r: &mut BufReader<TcpStream>,
    head: &mut Vec<u8>,
    cfg: &Config,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> io::Result<u16> {
    head.clear();
    head.extend_from_slice(b"POST ");
    head.extend_from_slice(path.as_bytes());
    head.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    head.extend_from_slice(cfg.host.as_bytes());
    head.extend_from_slice(b"\r\nContent-Type: ");
    head.extend_from_slice(content_type.as_bytes());
    head.extend_from_slice(b"\r\nContent-Length: ");
    push_i64(head, body.len() as i64);
    if let Some(t) = &cfg.token {
        head.extend_from_slice(b"\r\nAuthorization: Token ");
        head.extend_from_slice(t.as_bytes());
    }
    head.extend_from_slice(b"\r\n\r\n");
    s.write_all(head)?;
    s.write_all(body)?;
    let (status, keep, _body) = read_response(r)?;
    if !keep {
        return Err(io::Error::new(io::ErrorKind::ConnectionAborted, format!("server closed after {status}")));
    }
    Ok(status)
}

/// Reads `ok <line> <rows>` / `err <line> <why>` until line `upto` is acknowledged.
fn wait_tcp_ack(r: &mut BufReader<TcpStream>, upto: u64, buf: &mut Vec<u8>, st: &mut AgentStats) -> io::Result<()> {
    loop {
        buf.clear();
        if r.read_until(b'\n', buf)? == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "server closed the connection"));
        }
        let line = String::from_utf8_lossy(buf);
        let mut parts = line.split_whitespace();
        match (parts.next(), parts.next().and_then(|n| n.parse::<u64>().ok())) {
            (Some("ok"), Some(n)) if n >= upto => return Ok(()),
            (Some("ok"), Some(_)) => {}
            (Some("err"), _) => st.error(line.trim().to_string()),
            _ => return Err(io::Error::new(io::ErrorKind::InvalidData, format!("unexpected {line:?}"))),
        }
    }
}

fn percentiles(v: &mut [u32]) -> [u64; 4] {
    if v.is_empty() {
        return [0; 4];
    }
    v.sort_unstable();
    let at = |q: f64| u64::from(v[((v.len() - 1) as f64 * q).round() as usize]);
    [at(0.50), at(0.90), at(0.99), u64::from(v[v.len() - 1])]
}

/// Runs the agents until `duration_s` (or every agent's batch quota, or `stop`) and
/// merges what they measured.
pub fn run(cfg: Config, stop: Arc<AtomicBool>) -> Report {
    let cfg = Arc::new(cfg);
    let agents: Vec<Agent> = (0..cfg.agents).map(|i| Agent::new(i, cfg.clone())).collect();
    let start = Instant::now();
    let results = Arc::new(Mutex::new(Vec::with_capacity(cfg.agents)));
    let mut handles = Vec::with_capacity(cfg.agents);
    for a in agents {
        let stop = stop.clone();
        let results = results.clone();
        let h = thread::Builder::new()
            .name(format!("load-{}", a.id))
            .stack_size(256 << 10)
            .spawn(move || {
                let s = run_agent(a, start, stop);
                results.lock().unwrap_or_else(|e| e.into_inner()).push(s);
            })
            .expect("spawn agent thread");
        handles.push(h);
    }
    for h in handles {
        let _ = h.join();
    }
    let elapsed = start.elapsed().as_secs_f64();
    let stats = std::mem::take(&mut *results.lock().unwrap_or_else(|e| e.into_inner()));
    let mut rep = Report { elapsed_s: elapsed, ..Report::default() };
    let mut ack = Vec::new();
    let mut e2e = Vec::new();
    for s in stats {
        rep.rows_sent += s.rows_sent;
        rep.rows_acked += s.rows_acked;
        rep.batches_sent += s.batches_sent;
        rep.batches_acked += s.batches_acked;
        rep.errors += s.errors;
        rep.bytes_sent += s.bytes;
        for (code, n) in s.statuses {
            match rep.statuses.iter_mut().find(|(k, _)| *k == code) {
                Some((_, m)) => *m += n,
                None => rep.statuses.push((code, n)),
            }
        }
        for m in s.samples {
            if rep.error_samples.len() < 10 {
                rep.error_samples.push(m);
            }
        }
        ack.extend(s.ack_us);
        e2e.extend(s.e2e_us);
    }
    rep.ack_us = percentiles(&mut ack);
    rep.e2e_us = percentiles(&mut e2e);
    rep
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::lineproto::{decode, Limits, Precision, Producers, Schemas};

    #[test]
    fn qos_rows_have_13_tags_and_48_fields_and_decode() {
        let cfg = Arc::new(Config { agents: 3, ..Config::default() });
        let mut a = Agent::new(2, cfg);
        let mut out = Vec::new();
        a.render(&mut out, 5, 1_700_000_000_000_000_000);
        let text = String::from_utf8(out.clone()).unwrap();
        assert_eq!(text.lines().count(), 5);
        let s = std::sync::Mutex::new(Schemas::new());
        let p = std::sync::Mutex::new(Producers::new(0));
        let d = decode(&out, 1, Precision::Ns, 0, &s, &p, &Limits::default());
        let mut p = p.into_inner().unwrap();
        assert_eq!(d.body.errors, vec![]);
        assert_eq!(d.body.rows, 5);
        let (name, b) = &d.batches[0];
        assert_eq!(name, "qos");
        assert_eq!(b.num_columns(), 2 + 48);
        let np = p.take_new();
        assert_eq!(np.len(), 1);
        assert_eq!(np[0].tags.len(), 13);
    }

    #[test]
    fn cpu_rows_are_tsbs_shaped() {
        let cfg = Arc::new(Config { workload: Workload::Cpu, ..Config::default() });
        let mut a = Agent::new(7, cfg);
        let mut out = Vec::new();
        a.render(&mut out, 2, 1_451_606_400_000_000_000);
        let text = String::from_utf8(out).unwrap();
        let first = text.lines().next().unwrap();
        assert!(first.starts_with("cpu,hostname=host_7,region="), "{first}");
        let (tags, rest) = first.split_once(' ').unwrap();
        assert_eq!(tags.split(',').count(), 11);
        assert_eq!(rest.split(' ').next().unwrap().split(',').count(), 10);
    }

    #[test]
    fn decimal_formatting() {
        let mut v = Vec::new();
        for x in [0i64, 7, -12, i64::MAX, i64::MIN] {
            v.clear();
            push_i64(&mut v, x);
            assert_eq!(String::from_utf8(v.clone()).unwrap(), x.to_string());
        }
    }

    #[test]
    fn percentiles_of_a_few() {
        let mut v = vec![5, 1, 3, 2, 4];
        assert_eq!(percentiles(&mut v), [3, 5, 5, 5]);
        assert_eq!(percentiles(&mut []), [0; 4]);
    }
}
