//! `cmwq`: look at the machine's pods, run the lab's benchmarks and comparisons.
//!
//! Exit status ([`manpage::EXIT_STATUS`], shown by `--help` and the man
//! page): 0 on success, and also when the reader of stdout went away (`cmwq
//! topology | head -1`): the reader got what it wanted, as with ripgrep, not
//! an error; 1 with `cmwq: <message>` on stderr when the command failed; 2
//! for a command line clap refuses.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

mod bench;
mod compare;
mod control;
mod json;
mod latency;
mod manpage;
mod mix;
mod percpu;
mod topology;

/// The cmwq command line.
#[derive(Parser)]
#[command(
    name = "cmwq",
    version,
    about = "The kernel's concurrency-managed workqueue in user space, and its lab"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The kernel's test_workqueue on cmwq, side by side with the user-space peers.
    Bench(bench::BenchArgs),
    /// One-off jobs of which some block without saying so: cmwq with and without cmwq::blocking, and the peers.
    Mix(mix::MixArgs),
    /// A/B comparison of two configurations or two commands: interleaved runs, medians, Mann-Whitney and bootstrap verdicts.
    Compare(compare::CompareArgs),
    /// Per-CPU state with QPW (a remote drain takes the slot's lock instead of queueing work
    /// on that CPU): fast-path cost and isolation of a pinned loop, Local vs Qpw.
    Percpu(percpu::PercpuArgs),
    /// Latency under CPU hogs at normal, high or SCHED_FIFO priority (the SCHED_FIFO switch
    /// for high-priority pools): fio's clat lines for small work items.
    Latency(latency::LatencyArgs),
    /// Run one workload of the icache study (the pool lock's unlock-and-wake path inlined or
    /// not): `resident` or `frontend`.
    IcacheWorkload(compare::icache::WorkloadArgs),
    /// Show the machine's CPUs and the pods of every affinity scope (wq_dump.py's "Affinity Scopes").
    Topology(topology::TopologyArgs),
    /// A process's workqueues, pools and pods, as the kernel's wq_dump.py shows them.
    Dump(control::DumpArgs),
    /// A process's workqueue counters every interval, as the kernel's wq_monitor.py.
    Monitor(control::MonitorArgs),
    /// Write a knob of a running process's workqueue, like its sysfs file.
    Set(control::SetArgs),
    /// The processes of this user that serve a cmwq control endpoint.
    Ps(control::PsArgs),
    /// Print a shell completion script, e.g. `cmwq completions bash > /etc/bash_completion.d/cmwq`.
    Completions(CompletionsArgs),
    /// Print the man page (roff), e.g. `cmwq man | man -l -`; with --dir, write one page per command there.
    Man(ManArgs),
    /// A process with a few busy workqueues that serves the control endpoint (tests, demos).
    #[command(name = "__control-child", hide = true)]
    ControlChild(control::ChildArgs),
}

/// Arguments of `cmwq completions`.
#[derive(clap::Args, Debug)]
struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// Arguments of `cmwq man`.
#[derive(clap::Args, Debug)]
struct ManArgs {
    /// Write `cmwq.1` and a `cmwq-COMMAND.1` page per command into this
    /// directory instead of printing `cmwq.1`.
    #[arg(long, value_name = "DIR")]
    dir: Option<std::path::PathBuf>,
}

/// Runs `cmwq completions`: the script for `a.shell`, from the clap definitions.
fn completions(a: CompletionsArgs) -> Result<(), String> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "cmwq", &mut out);
    print!("{}", String::from_utf8_lossy(&out));
    Ok(())
}

/// Runs `cmwq man`: the roff page(s), from the clap definitions plus the
/// ENVIRONMENT and EXIT STATUS sections.
fn man(a: ManArgs) -> Result<(), String> {
    let cmd = Cli::command();
    match a.dir {
        Some(dir) => manpage::write_dir(cmd, &dir),
        None => {
            print!("{}", manpage::render(cmd)?);
            Ok(())
        }
    }
}

/// The provenance lines of a plot: the machine, the commit this binary was
/// built from, and the command line that ran.
pub(crate) fn provenance() -> Vec<String> {
    let command: Vec<String> = std::env::args()
        .enumerate()
        .map(|(i, a)| {
            if i == 0 {
                "cmwq".to_string()
            } else if a.is_empty() || a.contains(char::is_whitespace) {
                format!("{a:?}")
            } else {
                a
            }
        })
        .collect();
    cmwq_lab::svg::provenance(env!("CMWQ_BUILD_COMMIT"), &command.join(" "))
}

/// Whether a panic is std's `failed printing to stdout` on a closed pipe
/// (EPIPE: the reader exited).
fn is_broken_pipe(msg: &str) -> bool {
    msg.starts_with("failed printing to stdout") && msg.contains("(os error 32)")
}

/// Writes to a closed stdout end the process quietly with status 0, whichever
/// command and thread wrote: `println!` panics on EPIPE (Rust ignores
/// SIGPIPE), and this hook turns that one panic into the exit a pipeline
/// expects; every other panic keeps the default report.
fn exit_quietly_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if is_broken_pipe(msg) {
            std::process::exit(0);
        }
        default(info);
    }));
}

fn main() {
    exit_quietly_on_broken_pipe();
    let matches = Cli::command()
        .after_help(manpage::exit_status_help())
        .get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let res = match cli.cmd {
        Cmd::Bench(a) => bench::run(a),
        Cmd::Mix(a) => mix::run(a),
        Cmd::Compare(a) => compare::run(a),
        Cmd::Percpu(a) => percpu::run(a),
        Cmd::Latency(a) => latency::run(a),
        Cmd::IcacheWorkload(a) => compare::icache::run_workload(a),
        Cmd::Topology(a) => topology::run(a),
        Cmd::Dump(a) => control::dump(a),
        Cmd::Monitor(a) => control::monitor(a),
        Cmd::Set(a) => control::set(a),
        Cmd::Ps(a) => control::ps(a),
        Cmd::Completions(a) => completions(a),
        Cmd::Man(a) => man(a),
        Cmd::ControlChild(a) => control::child(a),
    };
    if let Err(e) = res {
        // Messages name what failed; the prefix is added here only.
        let e = e.strip_prefix("cmwq: ").unwrap_or(&e);
        eprintln!("cmwq: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn broken_pipe_panics_are_recognised() {
        assert!(super::is_broken_pipe(
            "failed printing to stdout: Broken pipe (os error 32)"
        ));
        assert!(!super::is_broken_pipe(
            "failed printing to stdout: No space left on device (os error 28)"
        ));
        assert!(!super::is_broken_pipe(
            "failed printing to stderr: Broken pipe (os error 32)"
        ));
        assert!(!super::is_broken_pipe("capacity overflow"));
    }
}
