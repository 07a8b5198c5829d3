//! The bench's command line: which sections run and their sizes, each flag
//! also read from `BATON_BENCH_<FLAG>`, with the defaults.

use std::path::PathBuf;

use clap::{ArgAction, Parser};

use crate::{fleet, workflows};

/// What to run: `--sections` picks among these (default: all).
/// (`fleet` runs for minutes of wall-clock time: only when asked for.)
pub(crate) const SECTIONS: &[&str] =
    &["claim-path", "artifacts", "contention", "workflows", "idle", "cold-start", "fleet"];

/// The repository root (the bench's default paths are under its `target/`).
pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// What the claim path costs, counted against the local stack
/// (docs/benchmarks.md). Needs BATON_AWS_ENDPOINT: run `make bench`.
#[derive(Debug, Parser)]
#[command(
    name = "bench",
    args_override_self = true,
    after_help = "Every flag also reads BATON_BENCH_<FLAG> (e.g. BATON_BENCH_JOBS=200)."
)]
pub(crate) struct Options {
    /// Sections to run: claim-path, artifacts, contention, workflows, idle, cold-start, fleet (not by default)
    #[arg(
        long,
        env = "BATON_BENCH_SECTIONS",
        value_name = "LIST",
        value_delimiter = ',',
        action = ArgAction::Set,
        value_parser = section,
        default_value = "claim-path,artifacts,contention,workflows,idle,cold-start"
    )]
    pub(crate) sections: Vec<String>,
    /// Jobs per drain
    #[arg(
        long,
        env = "BATON_BENCH_JOBS",
        value_name = "N",
        value_parser = number,
        default_value = "1000",
        help_heading = "Contention"
    )]
    pub(crate) jobs: usize,
    /// Runner counts, each draining the jobs
    #[arg(
        long,
        env = "BATON_BENCH_RUNNERS",
        value_name = "LIST",
        value_delimiter = ',',
        action = ArgAction::Set,
        value_parser = number,
        default_value = "1,8,32,64",
        help_heading = "Contention"
    )]
    pub(crate) runners: Vec<usize>,
    /// Workspace counts the jobs are spread over
    #[arg(
        long,
        env = "BATON_BENCH_WORKSPACES",
        value_name = "LIST",
        value_delimiter = ',',
        action = ArgAction::Set,
        value_parser = number,
        default_value = "1,10",
        help_heading = "Contention"
    )]
    pub(crate) workspaces: Vec<usize>,
    /// Workflow shapes: single, fan-out-10, fan-out-40, chain-50, fan-out-256, logs-1mib (one job printing 1 MiB)
    #[arg(
        long,
        env = "BATON_BENCH_SHAPES",
        value_name = "LIST",
        value_delimiter = ',',
        action = ArgAction::Set,
        value_parser = shape,
        default_value = "single,fan-out-10,chain-50",
        help_heading = "Workflows"
    )]
    pub(crate) shapes: Vec<workflows::Shape>,
    /// Runs of each shape (at least 1)
    #[arg(
        long,
        env = "BATON_BENCH_RUNS",
        value_name = "N",
        value_parser = number,
        default_value = "3",
        help_heading = "Workflows"
    )]
    pub(crate) runs: usize,
    /// In-process baton-runner agents executing the workflows (at least 1)
    #[arg(
        long,
        env = "BATON_BENCH_WORKFLOW_RUNNERS",
        value_name = "N",
        value_parser = number,
        default_value = "4",
        help_heading = "Workflows"
    )]
    pub(crate) workflow_runners: usize,
    /// Contention's jobs get priorities spread over -N..=N (0: all 0), to
    /// show what `priority` costs a claim
    #[arg(
        long,
        env = "BATON_BENCH_PRIORITY_SPREAD",
        value_name = "N",
        default_value_t = 0,
        value_parser = clap::value_parser!(i32).range(0..=100),
        help_heading = "Contention"
    )]
    pub(crate) priority_spread: i32,
    /// Where the functions' release binaries are
    #[arg(
        long,
        env = "BATON_BENCH_BIN_DIR",
        value_name = "DIR",
        default_value_os_t = root().join("target/release"),
        help_heading = "Cold start"
    )]
    pub(crate) bin_dir: PathBuf,
    /// Runs per function (at least 1)
    #[arg(
        long,
        env = "BATON_BENCH_COLD_RUNS",
        value_name = "N",
        value_parser = number,
        default_value = "5",
        help_heading = "Cold start"
    )]
    pub(crate) cold_runs: usize,
    /// The `baton-runner` the fleet's machines run (scripts/bench.sh builds it)
    #[arg(long, env = "BATON_BENCH_RUNNER_BIN", value_name = "PATH", default_value_os_t = fleet::default_runner_bin(&root()), help_heading = "Fleet")]
    pub(crate) runner_bin: PathBuf,
    /// Most machines of the elastic fleet, and the size of the fixed one
    #[arg(long, env = "BATON_BENCH_FLEET_SIZE", value_name = "N", default_value_t = 5, help_heading = "Fleet")]
    pub(crate) fleet_size: u32,
    /// Bursts of the bursty workload
    #[arg(long, env = "BATON_BENCH_FLEET_BURSTS", value_name = "N", value_parser = number, default_value = "3", help_heading = "Fleet")]
    pub(crate) fleet_bursts: usize,
    /// Jobs a burst (one run of that many parallel jobs)
    #[arg(long, env = "BATON_BENCH_FLEET_BURST_JOBS", value_name = "N", value_parser = number, default_value = "20", help_heading = "Fleet")]
    pub(crate) fleet_burst_jobs: usize,
    /// Seconds between bursts
    #[arg(long, env = "BATON_BENCH_FLEET_GAP_S", value_name = "S", default_value_t = 300, help_heading = "Fleet")]
    pub(crate) fleet_gap_s: u64,
    /// Seconds each job sleeps
    #[arg(long, env = "BATON_BENCH_FLEET_JOB_S", value_name = "S", default_value_t = 5, help_heading = "Fleet")]
    pub(crate) fleet_job_s: u64,
    /// The elastic fleet's idle timeout, seconds (10 at least)
    #[arg(
        long,
        env = "BATON_BENCH_FLEET_IDLE_TIMEOUT_S",
        value_name = "S",
        default_value_t = 30,
        help_heading = "Fleet"
    )]
    pub(crate) fleet_idle_timeout_s: u32,
    /// Cold starts measured on each fleet
    #[arg(long, env = "BATON_BENCH_FLEET_COLD_RUNS", value_name = "N", value_parser = number, default_value = "3", help_heading = "Fleet")]
    pub(crate) fleet_cold_runs: usize,
    /// The JSON report (the functions' stdout goes next to it)
    #[arg(
        long,
        env = "BATON_BENCH_OUT",
        value_name = "PATH",
        default_value_os_t = root().join("target/bench/bench.json")
    )]
    pub(crate) out: PathBuf,
}

fn number(raw: &str) -> Result<usize, String> {
    raw.trim().parse().map_err(|_| format!("cannot read {raw:?}"))
}

fn section(raw: &str) -> Result<String, String> {
    SECTIONS.iter().find(|s| **s == raw.trim()).map(|s| s.to_string()).ok_or_else(|| format!("cannot read {raw:?}"))
}

fn shape(raw: &str) -> Result<workflows::Shape, String> {
    workflows::Shape::parse(raw.trim()).ok_or_else(|| format!("cannot read {raw:?}"))
}

/// The options from the command line, then `BATON_BENCH_<FLAG>`, then the
/// defaults.
pub(crate) fn options() -> Options {
    Options::parse().at_least_one_run()
}

impl Options {
    /// Runs of any kind are at least one (`--runs 0` runs once).
    fn at_least_one_run(mut self) -> Self {
        self.runs = self.runs.max(1);
        self.workflow_runners = self.workflow_runners.max(1);
        self.cold_runs = self.cold_runs.max(1);
        self
    }

    pub(crate) fn wants(&self, section: &str) -> bool {
        self.sections.iter().any(|s| s == section)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, FromArgMatches};

    /// Parses `args` as the command line, ignoring the environment.
    fn parse(args: &[&str]) -> Result<Options, clap::Error> {
        let command = Options::command().mut_args(|arg| arg.env(None));
        let matches = command.try_get_matches_from(std::iter::once("bench").chain(args.iter().copied()))?;
        Options::from_arg_matches(&matches).map(Options::at_least_one_run)
    }

    #[test]
    fn every_flag_also_reads_baton_bench_flag() {
        let command = Options::command();
        let flags: Vec<(String, Option<String>)> = command
            .get_arguments()
            .filter_map(|arg| arg.get_long().map(|long| (long, arg.get_env())))
            .filter(|(long, _)| *long != "help")
            .map(|(long, env)| (long.to_string(), env.map(|e| e.to_string_lossy().into_owned())))
            .collect();
        let names: Vec<&str> = flags.iter().map(|(long, _)| long.as_str()).collect();
        assert_eq!(
            names,
            [
                "sections",
                "jobs",
                "runners",
                "workspaces",
                "shapes",
                "runs",
                "workflow-runners",
                "priority-spread",
                "bin-dir",
                "cold-runs",
                "runner-bin",
                "fleet-size",
                "fleet-bursts",
                "fleet-burst-jobs",
                "fleet-gap-s",
                "fleet-job-s",
                "fleet-idle-timeout-s",
                "fleet-cold-runs",
                "out"
            ]
        );
        for (long, env) in &flags {
            assert_eq!(env.as_deref(), Some(format!("BATON_BENCH_{}", long.replace('-', "_").to_uppercase()).as_str()));
        }
    }

    #[test]
    fn defaults() {
        let o = parse(&[]).unwrap();
        // Every section but the fleet's, which runs for minutes.
        assert_eq!(o.sections, SECTIONS[..SECTIONS.len() - 1]);
        assert_eq!(SECTIONS.last(), Some(&"fleet"));
        assert_eq!(
            (o.fleet_size, o.fleet_bursts, o.fleet_burst_jobs, o.fleet_gap_s, o.fleet_job_s, o.fleet_cold_runs),
            (5, 3, 20, 300, 5, 3),
            "the issue's bursty shape: 3 bursts of 20 jobs, 5 minutes apart, against a fleet of 5"
        );
        assert_eq!((o.jobs, o.runners.as_slice(), o.workspaces.as_slice()), (1000, &[1, 8, 32, 64][..], &[1, 10][..]));
        assert_eq!(o.shapes, [workflows::Shape::Single, workflows::Shape::FanOut10, workflows::Shape::Chain50]);
        assert_eq!((o.runs, o.workflow_runners, o.cold_runs), (3, 4, 5));
        assert_eq!(o.bin_dir, PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release"));
        assert_eq!(o.out, PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/bench/bench.json"));
    }

    #[test]
    fn lists_are_comma_separated_and_the_last_flag_wins() {
        let o = parse(&[
            "--sections",
            "idle, cold-start",
            "--runners",
            "1,8",
            "--runners",
            "2",
            "--jobs",
            "200",
            "--jobs",
            "300",
            "--shapes",
            "chain,1",
            "--runs",
            "0",
            "--out",
            "x.json",
        ])
        .unwrap();
        assert_eq!(o.sections, ["idle", "cold-start"]);
        assert_eq!((o.runners.as_slice(), o.jobs), (&[2][..], 300));
        assert_eq!(o.shapes, [workflows::Shape::Chain50, workflows::Shape::Single]);
        assert_eq!(o.runs, 1);
        assert_eq!(o.out, PathBuf::from("x.json"));
    }

    #[test]
    fn unreadable_values_and_unknown_flags_are_errors() {
        for args in [
            &["--sections", "claim-path,nope"][..],
            &["--jobs", "many"],
            &["--runners", "1,,8"],
            &["--shapes", "star"],
            &["--jobs"],
            &["--bogus", "1"],
            &["stray"],
        ] {
            assert!(parse(args).is_err(), "{args:?}");
        }
    }
}
