//! Flows of track events: `flow_ids` / `terminating_flow_ids` (and their older varint
//! spellings `flow_ids_old` / `terminating_flow_ids_old`, the same ids) become rows of the
//! `flow` event type that the Chrome JSON importer writes for `s`/`t`/`f` events
//! (`chrome::decl::FLOW`), so that analyses and the Chrome exporter read both alike.
//!
//! Owns the flow tracker. As Perfetto's trace processor does, a flow id is global to the trace;
//! the event carrying it is a step of the flow: a slice begin (the step is the slice: its
//! start on its track), a slice end (the slice it ends), or an instant. The first step of an id
//! starts a flow (`s`); each later step makes an arrow from the previous one (`t`); a step in
//! `terminating_flow_ids` makes the last arrow (`f`) and frees the id, which a later event may
//! use for a new flow. One row per arrow, at its source: (ts, producer, seq) of the source step,
//! `dst_producer` / `dst_ts` of the next, `src_phase` / `dst_phase` and `bp = "e"` (a step binds
//! to its enclosing slice, the slice that carries it). The arrow into a step is written when
//! the flow goes on or ends (`f` when it ends there, or when the trace ends after it, `t` when
//! it goes on), so that a chain comes out as Chrome's s -> t ... -> f and its Chrome export
//! reads back as the same rows. A first step never followed makes no row (counted as
//! `unfollowed_flows`), as a terminating id without a flow (`unmatched_flow_ends`).

use super::decl;
use crate::formats::table::{FastMap, Table};

/// One step of a flow: where it is and the seq of the row it would be the source of.
#[derive(Debug, Clone, Copy)]
pub(super) struct Step {
    pub ts: i64,
    pub producer: i32,
    pub seq: i64,
}

#[derive(Debug)]
struct Pending {
    /// The flow's last step so far, and its phase (`s` first, `t` later).
    last: Step,
    phase: u8,
    /// The arrow into `last` not written yet: its source and the source's phase.
    arrow: Option<(Step, u8)>,
}

/// Column indexes of the flow table (the common columns, then FLOW's parameters).
struct Cols {
    name: usize,
    id: usize,
    dst_producer: usize,
    dst_ts: usize,
    src_phase: usize,
    dst_phase: usize,
    bp: usize,
}

fn col(name: &str) -> usize {
    3 + decl::FLOW.params.iter().position(|p| p.name == name).expect("a parameter of chrome's flow")
}

/// The flow tracker of one trace.
pub(super) struct Flows {
    pending: FastMap<u64, Pending>,
    cols: Cols,
    /// Arrows written (rows of `flow`).
    pub arrows: u64,
    /// Flows whose first step was never followed (no arrow: nothing written).
    pub unfollowed: u64,
    /// Terminating ids with no flow under way.
    pub unmatched_ends: u64,
}

impl Default for Flows {
    fn default() -> Self {
        Flows {
            pending: FastMap::default(),
            cols: Cols {
                name: col("name"),
                id: col("id"),
                dst_producer: col("dst_producer"),
                dst_ts: col("dst_ts"),
                src_phase: col("src_phase"),
                dst_phase: col("dst_phase"),
                bp: col("bp"),
            },
            arrows: 0,
            unfollowed: 0,
            unmatched_ends: 0,
        }
    }
}

impl Flows {
    /// A step of flow `id` at `at`; `terminating`: the flow ends here.
    pub fn step(&mut self, t: &mut Table, id: u64, at: Step, terminating: bool) {
        match self.pending.remove(&id) {
            None if terminating => self.unmatched_ends += 1,
            None => {
                self.pending.insert(id, Pending { last: at, phase: b's', arrow: None });
            }
            Some(p) => {
                if let Some((src, ph)) = p.arrow {
                    self.row(t, id, src, ph, p.last, b't');
                }
                if terminating {
                    self.row(t, id, p.last, p.phase, at, b'f');
                } else {
                    self.pending.insert(id, Pending { last: at, phase: b't', arrow: Some((p.last, p.phase)) });
                }
            }
        }
    }

    /// The end of the trace: each flow under way ends at its last step.
    pub fn finish(&mut self, t: &mut Table) {
        let mut open: Vec<(u64, Pending)> = self.pending.drain().collect();
        open.sort_by_key(|(id, p)| (p.last.ts, p.last.producer, *id));
        for (id, p) in open {
            match p.arrow {
                Some((src, ph)) => self.row(t, id, src, ph, p.last, b'f'),
                None => self.unfollowed += 1,
            }
        }
    }

    fn row(&mut self, t: &mut Table, id: u64, src: Step, src_phase: u8, dst: Step, dst_phase: u8) {
        let c = &self.cols;
        t.start(src.ts, src.producer, src.seq);
        t.set_str(c.name, "flow");
        t.set_str(c.id, &format!("0x{id:x}"));
        t.set_i64(c.dst_producer, i64::from(dst.producer));
        t.set_i64(c.dst_ts, dst.ts);
        t.set_str(c.src_phase, if src_phase == b's' { "s" } else { "t" });
        t.set_str(c.dst_phase, if dst_phase == b'f' { "f" } else { "t" });
        t.set_str(c.bp, "e");
        t.end();
        self.arrows += 1;
    }
}
