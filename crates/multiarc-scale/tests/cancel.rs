//! Issue 39's attack "a query cancelled halfway", with a real engine:
//! DataFusion 55 over `CachedStore` (memory only, and with an L2) on a
//! one-node Garage, 20 ms added to every request. A TPC-H query is dropped
//! (its task aborted) while its blocks are being fetched; then the same
//! query runs to its end with the plain store's answer, within a bound (no
//! load left waiting on the cancelled one), and once more without a data
//! request. Skips (with the install command) where Garage is absent,
//! unless CI is set.

mod common;

use multiarc_scale::engine::{self, answer_digest, Row};
use multiarc_scale::tpch;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn a_query_cancelled_halfway_leaves_the_cache_serving_right_answers() {
    // Small blocks: a query's reads are many blocks, fetched over many
    // round trips, so the cancel lands among them.
    let Some(data) = common::tpch_on_garage(16 << 10) else {
        return;
    };
    let (setup, runtime) = (&data.setup, &data.runtime);
    let sql = tpch::query(3);
    runtime.block_on(async {
        let plain = engine::build(Row::Datafusion, setup).await.unwrap();
        let expected = answer_digest(&plain.collect(sql).await.unwrap()).unwrap();
        for row in [Row::Multiarc, Row::MultiarcL2] {
            let latency = Duration::from_millis(20);
            let built = Arc::new(
                engine::build_with_latency(row, setup, latency)
                    .await
                    .unwrap(),
            );
            let block_requests = || built.cache().unwrap().stats().block_requests;
            let task = tokio::spawn({
                let built = Arc::clone(&built);
                async move { built.collect(sql).await.map(|b| b.len()) }
            });
            // Cancelled once its first block fetches went out.
            let deadline = Instant::now() + Duration::from_secs(30);
            while block_requests() < 2 && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            task.abort();
            let cancelled = task.await;
            assert!(
                cancelled.as_ref().is_err_and(|e| e.is_cancelled()),
                "{}: the query ended before it was cancelled: {cancelled:?}",
                row.name()
            );
            let at_cancel = block_requests();
            // The same query again, to its end: the right answer, and no
            // load left waiting for the cancelled one.
            let again = tokio::time::timeout(Duration::from_secs(120), built.collect(sql))
                .await
                .unwrap_or_else(|_| panic!("{}: the query after the cancel hung", row.name()))
                .unwrap();
            assert_eq!(answer_digest(&again).unwrap(), expected, "{}", row.name());
            // And warm: nothing from the store but metadata.
            let warm_from = built.traffic();
            let warm = built.collect(sql).await.unwrap();
            assert_eq!(answer_digest(&warm).unwrap(), expected, "{}", row.name());
            let warm_traffic = built.traffic().since(warm_from);
            assert_eq!(
                warm_traffic.bytes,
                0,
                "{}: the warm query fetched data",
                row.name()
            );
            let after = block_requests();
            assert!(
                at_cancel >= 2 && after > at_cancel,
                "{}: cancelled after {at_cancel} of {after} block requests: not halfway",
                row.name()
            );
            eprintln!(
                "{}: cancelled after {at_cancel} block requests; {after} in all",
                row.name()
            );
        }
    });
}
