//! What the scale crate's tests share: TPC-H at scale factor 0.01 written
//! to a one-node Garage, and the setup of the rows that read it.

use multiarc_garage_harness::{ForTests, Garage};
use multiarc_scale::engine::{self, Setup};
use multiarc_scale::tpch::{self, Written};
use object_store::path::Path;
use std::sync::Arc;

/// The tables on a running Garage, what was written, the rows' setup
/// (64 MiB of memory, 256 MiB of disk, blocks of the size asked for) and a
/// runtime to drive them. Garage and the disks go when this does. (Each
/// test binary reads the fields it needs.)
#[allow(dead_code)]
pub struct Tpch {
    pub written: Vec<Written>,
    pub setup: Setup,
    pub runtime: tokio::runtime::Runtime,
    _tmp: tempfile::TempDir,
    _garage: Garage,
}

/// Starts Garage and writes the tables; `None`, having said why, where
/// Garage is absent and CI is not set. The rows' S3 clients read the
/// credentials from the environment, which this sets: one test per binary.
pub fn tpch_on_garage(block_size: u64) -> Option<Tpch> {
    let garage = match Garage::start_for_tests(1) {
        Ok(ForTests::Running(g)) => g,
        Ok(ForTests::Skip { reason }) => {
            eprintln!("skipped: {reason}");
            return None;
        }
        Err(e) => panic!("starting Garage: {e}"),
    };
    std::env::set_var("AWS_ACCESS_KEY_ID", &garage.access_key_id);
    std::env::set_var("AWS_SECRET_ACCESS_KEY", &garage.secret_access_key);
    let tmp = tempfile::tempdir().unwrap();
    let setup = Setup {
        endpoint: garage.endpoint(0),
        bucket: garage.bucket.clone(),
        prefix: "tpch/sf0.01".into(),
        region: garage.region.clone(),
        memory: 64 << 20,
        disk: 256 << 20,
        disk_dir: tmp.path().join("disks"),
        block_size,
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let store = engine::s3(&setup).unwrap();
    let written = runtime
        .block_on(tpch::generate(
            Arc::new(store),
            &Path::from(setup.prefix.as_str()),
            0.01,
            tmp.path(),
            |_| {},
        ))
        .unwrap();
    Some(Tpch {
        written,
        setup,
        runtime,
        _tmp: tmp,
        _garage: garage,
    })
}
