//! The `needs` graph of an attempt's jobs, shared by validation (cycles),
//! scheduling (upstream failures) and reruns (downstream closure).
//!
//! Jobs are addressed by their position in definition order, so every
//! answer is deterministic: the same definition always names the same cycle.

use std::collections::HashMap;

/// Jobs and their `needs`, by index. An edge `job → need` reads "job needs
/// need". Needs naming no job are not edges; [`NeedsGraph::has_unknown_needs`]
/// remembers them so callers can decide what they mean.
#[derive(Debug, Clone)]
pub struct NeedsGraph {
    keys: Vec<String>,
    index: HashMap<String, usize>,
    needs: Vec<Vec<usize>>,
    dependents: Vec<Vec<usize>>,
    unknown_needs: Vec<bool>,
}

impl NeedsGraph {
    /// Builds the graph from `(key, needs)` pairs in definition order. If a
    /// key repeats, needs naming it point at its first occurrence.
    pub fn new<'a, I, N>(jobs: I) -> Self
    where
        I: IntoIterator<Item = (&'a str, N)>,
        N: IntoIterator<Item = &'a String>,
    {
        let jobs: Vec<(&str, Vec<&String>)> =
            jobs.into_iter().map(|(key, needs)| (key, needs.into_iter().collect())).collect();
        let keys: Vec<String> = jobs.iter().map(|(key, _)| key.to_string()).collect();
        let mut index = HashMap::with_capacity(keys.len());
        for (position, key) in keys.iter().enumerate() {
            index.entry(key.clone()).or_insert(position);
        }
        let mut needs = vec![Vec::new(); keys.len()];
        let mut dependents = vec![Vec::new(); keys.len()];
        let mut unknown_needs = vec![false; keys.len()];
        for (job, (_, job_needs)) in jobs.iter().enumerate() {
            for need in job_needs {
                match index.get(need.as_str()) {
                    Some(&need) if !needs[job].contains(&need) => {
                        needs[job].push(need);
                        dependents[need].push(job);
                    }
                    Some(_) => {}
                    None => unknown_needs[job] = true,
                }
            }
        }
        Self { keys, index, needs, dependents, unknown_needs }
    }

    /// Number of jobs.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the graph has no job.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The key of the job at `job`.
    pub fn key(&self, job: usize) -> &str {
        &self.keys[job]
    }

    /// The position of the job named `key` (its first occurrence).
    pub fn index_of(&self, key: &str) -> Option<usize> {
        self.index.get(key).copied()
    }

    /// The known needs of `job`, in the order written, without repeats.
    pub fn needs(&self, job: usize) -> &[usize] {
        &self.needs[job]
    }

    /// Whether `job` names a need that is not a job of the graph.
    pub fn has_unknown_needs(&self, job: usize) -> bool {
        self.unknown_needs[job]
    }

    /// The first cycle found walking jobs in definition order, as the path
    /// of keys that follows `needs` and returns to its start
    /// (`["a", "b", "a"]` for a needs b, b needs a).
    pub fn find_cycle(&self) -> Option<Vec<String>> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            Unvisited,
            OnPath,
            Done,
        }
        let mut marks = vec![Mark::Unvisited; self.len()];
        for start in 0..self.len() {
            if marks[start] != Mark::Unvisited {
                continue;
            }
            // Iterative depth-first walk: (job, next need to look at).
            let mut path: Vec<(usize, usize)> = vec![(start, 0)];
            marks[start] = Mark::OnPath;
            while let Some(&mut (job, ref mut next)) = path.last_mut() {
                let Some(&need) = self.needs[job].get(*next) else {
                    marks[job] = Mark::Done;
                    path.pop();
                    continue;
                };
                *next += 1;
                match marks[need] {
                    Mark::Unvisited => {
                        marks[need] = Mark::OnPath;
                        path.push((need, 0));
                    }
                    Mark::OnPath => {
                        let from = path.iter().position(|&(on_path, _)| on_path == need).unwrap_or(0);
                        let mut cycle: Vec<String> = path[from..].iter().map(|&(j, _)| self.keys[j].clone()).collect();
                        cycle.push(self.keys[need].clone());
                        return Some(cycle);
                    }
                    Mark::Done => {}
                }
            }
        }
        None
    }

    /// `seeds` plus every job downstream of one (that needs one, directly or
    /// through other jobs).
    pub fn downstream_of(&self, seeds: &[bool]) -> Vec<bool> {
        let mut reached = seeds.to_vec();
        reached.resize(self.len(), false);
        let mut to_visit: Vec<usize> = (0..self.len()).filter(|&job| reached[job]).collect();
        while let Some(job) = to_visit.pop() {
            for &dependent in &self.dependents[job] {
                if !reached[dependent] {
                    reached[dependent] = true;
                    to_visit.push(dependent);
                }
            }
        }
        reached
    }

    /// For each job, whether some job upstream of it (a need, a need's need,
    /// …) is `marked`. A job is not upstream of itself unless in a cycle.
    pub fn has_marked_upstream(&self, marked: &[bool]) -> Vec<bool> {
        let seeds: Vec<bool> = (0..self.len()).map(|job| marked.get(job).copied().unwrap_or(false)).collect();
        // A job has a marked upstream iff it is downstream of a marked job's dependents.
        let mut direct = vec![false; self.len()];
        for job in (0..self.len()).filter(|&job| seeds[job]) {
            for &dependent in &self.dependents[job] {
                direct[dependent] = true;
            }
        }
        self.downstream_of(&direct)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(jobs: &[(&str, &[&str])]) -> NeedsGraph {
        let owned: Vec<(String, Vec<String>)> =
            jobs.iter().map(|(key, needs)| (key.to_string(), needs.iter().map(|n| n.to_string()).collect())).collect();
        NeedsGraph::new(owned.iter().map(|(key, needs)| (key.as_str(), needs)))
    }

    fn keys(g: &NeedsGraph, flags: &[bool]) -> Vec<String> {
        (0..g.len()).filter(|&j| flags[j]).map(|j| g.key(j).to_string()).collect()
    }

    #[test]
    fn an_acyclic_graph_has_no_cycle() {
        let g = graph(&[("build", &[]), ("test", &["build"]), ("report", &["build", "test"])]);
        assert_eq!(g.find_cycle(), None);
    }

    #[test]
    fn a_two_job_cycle_is_named_from_its_first_job() {
        let g = graph(&[("a", &["b"]), ("b", &["a"])]);
        assert_eq!(g.find_cycle(), Some(vec!["a".into(), "b".into(), "a".into()]));
    }

    #[test]
    fn a_self_need_is_a_cycle_of_one() {
        let g = graph(&[("ok", &[]), ("loop", &["loop"])]);
        assert_eq!(g.find_cycle(), Some(vec!["loop".into(), "loop".into()]));
    }

    #[test]
    fn a_cycle_behind_an_acyclic_prefix_is_named_without_the_prefix() {
        let g = graph(&[("entry", &["x"]), ("x", &["y"]), ("y", &["z"]), ("z", &["x"])]);
        assert_eq!(g.find_cycle(), Some(vec!["x".into(), "y".into(), "z".into(), "x".into()]));
    }

    #[test]
    fn unknown_needs_are_remembered_but_are_not_edges() {
        let g = graph(&[("a", &["ghost"]), ("b", &["a", "a"])]);
        assert!(g.has_unknown_needs(0));
        assert!(!g.has_unknown_needs(1));
        assert_eq!(g.needs(1), &[0]);
    }

    #[test]
    fn downstream_follows_dependents_transitively() {
        let g = graph(&[("build", &[]), ("test-a", &["build"]), ("test-b", &["build"]), ("report", &["test-b"])]);
        let reached = g.downstream_of(&[false, false, true, false]);
        assert_eq!(keys(&g, &reached), ["test-b", "report"]);
    }

    #[test]
    fn marked_upstream_is_transitive_and_excludes_the_job_itself() {
        let g = graph(&[("a", &[]), ("b", &["a"]), ("c", &["b"]), ("d", &[])]);
        let upstream = g.has_marked_upstream(&[true, false, false, false]);
        assert_eq!(keys(&g, &upstream), ["b", "c"]);
    }
}
