//! CI's short version of the scale benchmark: TPC-H at scale factor 0.01
//! on a one-node Garage, DataFusion 55 over the plain store and through
//! `CachedStore` (memory only and with an L2), every pass; every answer
//! must equal the plain store's, and a warm pass through the cache must
//! fetch no data. Skips (with the install command) where Garage is absent,
//! unless CI is set.

use multiarc_garage_harness::{ForTests, Garage};
use multiarc_scale::engine::{self, Row, Setup};
use multiarc_scale::tpch;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use std::sync::Arc;

#[test]
fn datafusion_through_cached_store_answers_as_the_plain_store() {
    let garage = match Garage::start_for_tests(1) {
        Ok(ForTests::Running(g)) => g,
        Ok(ForTests::Skip { reason }) => {
            eprintln!("skipped: {reason}");
            return;
        }
        Err(e) => panic!("starting Garage: {e}"),
    };
    // The workers read the credentials from the environment; this test is
    // the binary's only one.
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
    let written = runtime
        .block_on(tpch::generate(
            Arc::new(store),
            &Path::from("tpch/sf0.01"),
            0.01,
            tmp.path(),
            |_| {},
        ))
        .unwrap();
    let lineitem = written.iter().find(|w| w.table == "lineitem").unwrap();
    assert_eq!(
        lineitem.rows, 60_175,
        "the specification's lineitem rows at SF 0.01"
    );
    let setup = Setup {
        endpoint,
        bucket: garage.bucket.clone(),
        prefix: "tpch/sf0.01".into(),
        region: garage.region.clone(),
        memory: 64 << 20,
        disk: 256 << 20,
        disk_dir: tmp.path().join("disks"),
        block_size: 256 << 10,
    };
    let rows = [Row::Datafusion, Row::Multiarc, Row::MultiarcL2];
    let queries = [1, 3, 5, 6, 14, 18];
    let results = engine::run(
        &rows,
        &setup,
        &queries,
        std::path::Path::new(env!("CARGO_BIN_EXE_multiarc-scale")),
        |p| eprintln!("{p}"),
    )
    .unwrap();
    // 3 rows x (6 cold + 6 warm + 1 scan + 5 after the scan + 6 remount).
    assert_eq!(results.len(), 3 * (6 + 6 + 1 + 5 + 6), "{results:#?}");
    for r in &results {
        assert!(r.error.is_none(), "{r:?}");
        assert_eq!(r.answer_ok, Some(true), "{r:?}");
    }
    for r in results
        .iter()
        .filter(|r| r.row != "datafusion" && r.pass == "warm")
    {
        assert_eq!(r.store_bytes, 0, "a warm query fetched data: {r:?}");
    }
    // The L2 survives the restart: the remount pass fetches no data.
    for r in results
        .iter()
        .filter(|r| r.row == "multiarc-l2" && r.pass == "remount")
    {
        assert_eq!(r.store_bytes, 0, "after the restart: {r:?}");
    }
}
