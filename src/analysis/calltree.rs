//! The aggregated call tree (calling-context tree) of a set of spans.
//!
//! Owns the interning of call paths: every span gets the node of its path from the root
//! (root key, ..., own key), nodes with equal paths are one node. A node's id is its
//! creation order, and nodes are created in order of depth, so a node's parent always
//! has a smaller id and the folded-stack text can be built level by level.

use rustc_hash::FxHashMap;

/// Nodes of the calling-context tree and the node of every span.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallTree {
    /// Node of each span (input order).
    pub node_of: Vec<i64>,
    /// Parent node of each node, -1 for roots.
    pub parent: Vec<i64>,
    /// Key (method, name code) of each node.
    pub key: Vec<i64>,
    /// Depth of each node, 0 for roots.
    pub depth: Vec<i32>,
}

/// Interns the call path of every span. `parent[i]` is the index of span `i`'s parent
/// span (-1 at the root) and `depth[i]` its depth (parent's depth + 1).
pub fn build(parent: &[i64], key: &[i64], depth: &[i32]) -> Result<CallTree, String> {
    let n = parent.len();
    if key.len() != n || depth.len() != n {
        return Err("parent, key and depth differ in length".into());
    }
    // Spans by depth (counting sort): parents are interned before their children.
    let max_depth = depth.iter().copied().max().unwrap_or(0);
    if depth.iter().any(|&d| d < 0) {
        return Err("negative depth".into());
    }
    let mut start = vec![0usize; max_depth as usize + 2];
    for &d in depth {
        start[d as usize + 1] += 1;
    }
    for i in 1..start.len() {
        start[i] += start[i - 1];
    }
    let mut order = vec![0u32; n];
    let mut at = start.clone();
    for (i, &d) in depth.iter().enumerate() {
        order[at[d as usize]] = i as u32;
        at[d as usize] += 1;
    }
    let mut t = CallTree { node_of: vec![-1; n], ..Default::default() };
    // (parent node, key) pairs are not attacker-controlled: FxHash (see Cargo.toml), SipHash cost 3x.
    let mut nodes: FxHashMap<(i64, i64), i64> = FxHashMap::default();
    for &i in &order {
        let i = i as usize;
        let pnode = match parent[i] {
            -1 => -1,
            p if p >= 0 && (p as usize) < n => {
                let pn = t.node_of[p as usize];
                if pn < 0 || depth[p as usize] + 1 != depth[i] {
                    return Err(format!("span {i}: parent {p} is not one level above it"));
                }
                pn
            }
            p => return Err(format!("span {i}: parent {p} out of range")),
        };
        let next = t.parent.len() as i64;
        let node = *nodes.entry((pnode, key[i])).or_insert(next);
        if node == next {
            t.parent.push(pnode);
            t.key.push(key[i]);
            t.depth.push(depth[i]);
        }
        t.node_of[i] = node;
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_paths_share_a_node() {
        // main(0) -> a(1) -> b(2); main(0) -> a(3) -> b(4); main -> b(5)
        let parent = [-1, 0, 1, 0, 3, 0];
        let key = [10, 11, 12, 11, 12, 12];
        let depth = [0, 1, 2, 1, 2, 1];
        let t = build(&parent, &key, &depth).unwrap();
        assert_eq!(t.node_of[1], t.node_of[3]);
        assert_eq!(t.node_of[2], t.node_of[4]);
        assert_ne!(t.node_of[5], t.node_of[2]);
        assert_eq!(t.parent.len(), 4);
        for (n, &p) in t.parent.iter().enumerate() {
            assert!(p < n as i64);
        }
    }

    #[test]
    fn inconsistent_parents_are_errors() {
        assert!(build(&[-1, 5], &[1, 2], &[0, 1]).is_err());
        assert!(build(&[-1, 0], &[1, 2], &[0, 2]).is_err());
    }
}
