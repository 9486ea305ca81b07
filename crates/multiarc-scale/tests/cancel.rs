//! Issue 39's attack "a query cancelled halfway", with a real engine:
//! DataFusion 55 over `CachedStore` (memory only, and with an L2) on a
//! one-node Garage, 20 ms added to every request. A TPC-H query is dropped
//! (its task aborted) while its blocks are being fetched; then the same
//! query runs to its end with the plain store's answer, within a bound (no
//! load left waiting on the cancelled one), and once more without a data
//! request. Skips (with the install command) where Garage is absent,
//! unless CI is set.

use multiarc_garage_harness::{ForTests, Garage};
use multiarc_scale::engine::{self, answer_digest, Row, Setup};
use multiarc_scale::tpch;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn a_query_cancelled_halfway_leaves_the_cache_serving_right_answers() {
    let garage = match Garage::start_for_tests(1) {
        Ok(ForTests::Running(g)) => g,
        Ok(ForTests::Skip { reason }) => {
            eprintln!("skipped: {reason}");
            return;
        }
        Err(e) => panic!("starting Garage: {e}"),
    };
    // The rows' S3 clients read the credentials from the environment; this
    // test is the binary's only one.
    std::env::set_var("AWS_ACCESS_KEY_ID", &garage.access_key_id);
    std::env::set_var("AWS_SECRET_ACCESS_KEY", &garage.secret_access_key);
    let tmp = tempfile::tempdir().unwrap();
    let endpoint = garage.endpoint(0);
    let store = AmazonS3Builder::new()
        .with_endpoint(&endpoint)
        .with_bucket_name(&garage.bucket)
        .with_region(&garage.region)
        .with_access_key_id(&garage.access_key_id)
        .with_secret_access_key(&garage.secret_access_key)
        .with_allow_http(true)
        .with_virtual_hosted_style_request(false)
        .build()
        .unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime
        .block_on(tpch::generate(
            Arc::new(store),
            &Path::from("tpch/sf0.01"),
            0.01,
            tmp.path(),
            |_| {},
        ))
        .unwrap();
    let setup = Setup {
        endpoint,
        bucket: garage.bucket.clone(),
        prefix: "tpch/sf0.01".into(),
        region: garage.region.clone(),
        memory: 64 << 20,
        disk: 256 << 20,
        disk_dir: tmp.path().join("disks"),
        // Small blocks: a query's reads are many blocks, fetched over many
        // round trips, so the cancel lands among them.
        block_size: 16 << 10,
    };
    let sql = tpch::query(3);
    runtime.block_on(async {
        let plain = engine::build(Row::Datafusion, &setup).await.unwrap();
        let expected = answer_digest(&plain.collect(sql).await.unwrap()).unwrap();
        for row in [Row::Multiarc, Row::MultiarcL2] {
            let latency = Duration::from_millis(20);
            let built = Arc::new(
                engine::build_with_latency(row, &setup, latency)
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
