//! Pods: cutting the CPUs per affinity scope, as `init_pod_type()` does.
//!
//! The kernel builds each scope's pods once at boot with a predicate "do CPUs
//! a and b share this scope": walking CPUs in ascending order, a CPU joins
//! the pod of the first lower CPU for which the predicate holds, or opens the
//! next pod.  Every predicate the kernel uses is "same X" for some per-CPU X
//! (same CPU, same SMT core, same LLC, same LLC shard, same node, anything),
//! so the walk is the same as numbering the distinct X values in the order
//! their lowest CPU appears.  That is what [`Topology::pods`] does, in one
//! pass with a hash map instead of the kernel's O(N²) double loop; the tests
//! check the two agree.
//!
//! # cache_shard
//!
//! One pod per LLC puts every CPU of a 72-core Grace behind one pool lock.
//! The `cache_shard` scope cuts each LLC into shards of about
//! `cache_shard_size` cores (SMT siblings always stay together), following
//! the kernel's `precompute_cache_shard_ids()`:
//!
//! * a core is an SMT group; its *leader* is its lowest CPU in the LLC, and
//!   the LLC has `nr_cores` leaders;
//! * `nr_shards = max(1, DIV_ROUND_CLOSEST(nr_cores, size))`, so the average
//!   shard is as close as possible to `size` cores: 11 cores make one shard,
//!   12 make two of 6, 36 make 8+7+7+7+7, 72 make nine of 8;
//! * every shard gets `nr_cores / nr_shards` cores and the first
//!   `nr_cores % nr_shards` shards one more; there is no small leftover shard;
//! * the LLC's CPUs are walked in ascending order: at each leader, if the
//!   current shard already holds its share of cores the next shard starts;
//!   a sibling takes its leader's shard.
//!
//! A size of 0 behaves as 1, as the kernel's `workqueue.cache_shard_size=0`.
//! Shards are computed over every online CPU of the LLC, even when the
//! topology is restricted, as the kernel computes them once for the machine.

use std::collections::{BTreeMap, HashMap};

use super::{NONE, PodType, Scope, Topology};

/// `DIV_ROUND_CLOSEST(x, d)` for unsigned values, without overflow.
fn div_round_closest(x: usize, d: usize) -> usize {
    let (q, r) = (x / d, x % d);
    q + usize::from(r >= d - d / 2)
}

impl Topology {
    /// The pods of `scope`; `cache_shard_size` 0 behaves as 1.
    ///
    /// Pods cover exactly [`Topology::online`] and are numbered in
    /// `init_pod_type` order (by lowest CPU); each pod's CPUs are sorted;
    /// `cpu_pod` has [`Topology::nr_cpu_ids`] entries, `None` for CPUs
    /// outside [`Topology::online`].  Linear in the number of CPUs.
    pub fn pods(&self, scope: Scope, cache_shard_size: usize) -> PodType {
        let key: Vec<usize> = match scope {
            Scope::Cpu => (0..self.nr_cpu_ids).collect(),
            Scope::Smt => self.core.clone(),
            Scope::Cache => self.llc.clone(),
            Scope::CacheShard => self.cache_shard_keys(cache_shard_size),
            Scope::Numa => self.node.clone(),
            Scope::System => vec![0; self.nr_cpu_ids],
        };
        // The kernel sets a pod's node once per CPU, so the pod's highest
        // CPU decides; computed over the whole machine, like the pods.
        let mut key_node: HashMap<usize, i32> = HashMap::new();
        for &c in &self.machine_online {
            let node = if scope == Scope::System {
                -1
            } else {
                i32::try_from(self.node[c]).unwrap_or(i32::MAX)
            };
            key_node.insert(key[c], node);
        }
        let mut pods: Vec<Vec<usize>> = Vec::new();
        let mut pod_node = Vec::new();
        let mut cpu_pod = vec![None; self.nr_cpu_ids];
        let mut key_pod: HashMap<usize, usize> = HashMap::new();
        for &c in &self.online {
            let k = key[c];
            let pod = *key_pod.entry(k).or_insert_with(|| {
                pods.push(Vec::new());
                pod_node.push(key_node.get(&k).copied().unwrap_or(0));
                pods.len() - 1
            });
            pods[pod].push(c);
            cpu_pod[c] = Some(pod);
        }
        PodType {
            pods,
            pod_node,
            cpu_pod,
        }
    }

    /// Per CPU id, a key naming its cache shard (the first CPU of the shard;
    /// `NONE` for CPUs that are not online).
    fn cache_shard_keys(&self, size: usize) -> Vec<usize> {
        let size = size.max(1);
        let mut key = vec![NONE; self.nr_cpu_ids];
        // The CPUs of each LLC, ascending (machine_online is ascending).
        let mut llcs: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for &c in &self.machine_online {
            llcs.entry(self.llc[c]).or_default().push(c);
        }
        for cpus in llcs.values() {
            // A core's leader is its lowest CPU inside this LLC.
            let mut leader: HashMap<usize, usize> = HashMap::new();
            for &c in cpus {
                leader.entry(self.core[c]).or_insert(c);
            }
            let nr_cores = leader.len();
            let nr_shards = div_round_closest(nr_cores, size).max(1);
            let cores_per_shard = nr_cores / nr_shards;
            let nr_large = nr_cores % nr_shards;
            let shard_cap = |id: usize| cores_per_shard + usize::from(id < nr_large);
            let mut shard_id = 0;
            let mut cores_in_shard = 0;
            let mut shard_key = cpus[0];
            for &c in cpus {
                let l = leader[&self.core[c]];
                if l == c {
                    if cores_in_shard == shard_cap(shard_id) {
                        shard_id += 1;
                        cores_in_shard = 0;
                        shard_key = c;
                    }
                    cores_in_shard += 1;
                    key[c] = shard_key;
                } else {
                    key[c] = key[l];
                }
            }
            debug_assert_eq!(shard_id + 1, nr_shards);
        }
        key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_closest() {
        assert_eq!(div_round_closest(11, 8), 1);
        assert_eq!(div_round_closest(12, 8), 2);
        assert_eq!(div_round_closest(3, 8), 0);
        assert_eq!(div_round_closest(4, 8), 1);
        assert_eq!(div_round_closest(7, 1), 7);
        assert_eq!(div_round_closest(5, usize::MAX), 0);
        assert_eq!(div_round_closest(usize::MAX, usize::MAX), 1);
    }
}
