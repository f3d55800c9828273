//! Scoped jobs: sum a borrowed slice in parallel on a workqueue, with no
//! `Arc` and no copy; `scope` returns once every job finished.
//!
//! Run with `cargo run -p cmwq --example scoped`.

use cmwq::Workqueue;

fn main() -> Result<(), cmwq::Error> {
    let wq = Workqueue::builder("example_scoped").unbound().build()?;
    let data: Vec<u64> = (1..=1_000_000).collect();
    let mut squares = vec![0u64; data.len()];

    let sum: u64 = wq.scope(|s| {
        // Jobs borrow `data` (shared) and disjoint parts of `squares` (mutable).
        for (src, dst) in data.chunks(100_000).zip(squares.chunks_mut(100_000)) {
            s.spawn(move || {
                for (d, x) in dst.iter_mut().zip(src) {
                    *d = x * x;
                }
            });
        }
        let parts: Vec<_> = data
            .chunks(100_000)
            .map(|c| s.spawn(move || c.iter().sum::<u64>()))
            .collect();
        parts.into_iter().map(|h| h.join().unwrap()).sum()
    });
    // Every job finished: `squares` is ours again, complete.
    assert_eq!(sum, 500_000_500_000);
    assert_eq!(squares[999_999], 1_000_000 * 1_000_000);
    println!("sum = {sum}, last square = {}", squares[999_999]);
    Ok(())
}
