//! `cmwq`: look at the machine's pods, run the lab's benchmarks and comparisons.

use clap::{Parser, Subcommand};

mod bench;
mod compare;
mod icache;
mod topology;

/// The cmwq command line.
#[derive(Parser)]
#[command(
    name = "cmwq",
    version,
    about = "cmwq: the kernel's workqueue in user space, and its lab"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The kernel's test_workqueue on cmwq, side by side with the user-space peers.
    Bench(bench::BenchArgs),
    /// A/B comparison of two configurations or two commands: interleaved runs, medians, Mann-Whitney and bootstrap verdicts.
    Compare(compare::CompareArgs),
    /// Run one workload of the icache study (seed 001): `resident` or `frontend`.
    IcacheWorkload(icache::WorkloadArgs),
    /// Show the machine's CPUs and the pods of every affinity scope (wq_dump.py's "Affinity Scopes").
    Topology(topology::TopologyArgs),
}

fn main() {
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Bench(a) => bench::run(a),
        Cmd::Compare(a) => compare::run(a),
        Cmd::IcacheWorkload(a) => icache::run_workload(a),
        Cmd::Topology(a) => topology::run(a),
    };
    if let Err(e) = res {
        eprintln!("cmwq: {e}");
        std::process::exit(1);
    }
}
