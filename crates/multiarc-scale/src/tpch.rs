//! TPC-H: its tables as `tpchgen` generates them, written as Parquet the
//! way query engines write it (row groups of 1,048,576 rows, page
//! statistics and offset indexes, Snappy), and its 22 queries with the
//! specification's validation parameters.

use anyhow::Context;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, WriteMultipart};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use std::io::Read;
use std::sync::Arc;
use tpchgen::generators::{
    CustomerGenerator, LineItemGenerator, NationGenerator, OrderGenerator, PartGenerator,
    PartSuppGenerator, RegionGenerator, SupplierGenerator,
};
use tpchgen_arrow::arrow::array::RecordBatch;
use tpchgen_arrow::arrow::error::ArrowError;
use tpchgen_arrow::{
    CustomerArrow, LineItemArrow, NationArrow, OrderArrow, PartArrow, PartSuppArrow, RegionArrow,
    SupplierArrow,
};

/// The tables, smallest first.
pub const TABLES: [&str; 8] = [
    "region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem",
];

/// The queries that read `lineitem`'s columns a scan also reads (Q1, Q6,
/// Q14) and two joins (Q3, Q5): what is asked again after a scan.
pub const HOT_QUERIES: [usize; 5] = [1, 3, 5, 6, 14];

/// A scan of every column of `lineitem` (larger than memory at scale).
pub const LINEITEM_SCAN: &str = "select count(*), sum(l_quantity), sum(l_extendedprice), \
     sum(l_discount), sum(l_tax), max(l_returnflag), max(l_linestatus), max(l_shipdate), \
     max(l_commitdate), max(l_receiptdate), max(l_shipinstruct), max(l_shipmode), \
     max(l_comment), sum(l_orderkey), sum(l_partkey), sum(l_suppkey), sum(l_linenumber) \
     from lineitem";

/// Query `n` (1 to 22).
pub fn query(n: usize) -> &'static str {
    const QUERIES: [&str; 22] = [
        include_str!("../queries/q1.sql"),
        include_str!("../queries/q2.sql"),
        include_str!("../queries/q3.sql"),
        include_str!("../queries/q4.sql"),
        include_str!("../queries/q5.sql"),
        include_str!("../queries/q6.sql"),
        include_str!("../queries/q7.sql"),
        include_str!("../queries/q8.sql"),
        include_str!("../queries/q9.sql"),
        include_str!("../queries/q10.sql"),
        include_str!("../queries/q11.sql"),
        include_str!("../queries/q12.sql"),
        include_str!("../queries/q13.sql"),
        include_str!("../queries/q14.sql"),
        include_str!("../queries/q15.sql"),
        include_str!("../queries/q16.sql"),
        include_str!("../queries/q17.sql"),
        include_str!("../queries/q18.sql"),
        include_str!("../queries/q19.sql"),
        include_str!("../queries/q20.sql"),
        include_str!("../queries/q21.sql"),
        include_str!("../queries/q22.sql"),
    ];
    QUERIES[n - 1]
}

/// Rows of `table` at `sf` (the specification's, lineitem about 4 per
/// order), for splitting tables into files.
fn approximate_rows(table: &str, sf: f64) -> f64 {
    let per_sf = match table {
        "region" | "nation" => return 25.0,
        "supplier" => 10_000.0,
        "customer" => 150_000.0,
        "part" => 200_000.0,
        "partsupp" => 800_000.0,
        "orders" => 1_500_000.0,
        _ => 6_000_000.0,
    };
    per_sf * sf
}

/// Rows per file at most (about 100-150 MB of lineitem): tables past it
/// are written in several files, as engines write large tables.
const ROWS_PER_FILE: f64 = 4_000_000.0;

/// How many files `table` is written in at `sf`.
pub fn files_of(table: &str, sf: f64) -> i32 {
    ((approximate_rows(table, sf) / ROWS_PER_FILE).ceil() as i32).max(1)
}

/// The batches of part `part` (1-based) of `parts` of `table`.
fn batches(
    table: &str,
    sf: f64,
    part: i32,
    parts: i32,
) -> Box<dyn Iterator<Item = Result<RecordBatch, ArrowError>> + Send> {
    const BATCH: usize = 65_536;
    match table {
        "region" => {
            Box::new(RegionArrow::new(RegionGenerator::new(sf, part, parts)).with_batch_size(BATCH))
        }
        "nation" => {
            Box::new(NationArrow::new(NationGenerator::new(sf, part, parts)).with_batch_size(BATCH))
        }
        "supplier" => Box::new(
            SupplierArrow::new(SupplierGenerator::new(sf, part, parts)).with_batch_size(BATCH),
        ),
        "customer" => Box::new(
            CustomerArrow::new(CustomerGenerator::new(sf, part, parts)).with_batch_size(BATCH),
        ),
        "part" => {
            Box::new(PartArrow::new(PartGenerator::new(sf, part, parts)).with_batch_size(BATCH))
        }
        "partsupp" => Box::new(
            PartSuppArrow::new(PartSuppGenerator::new(sf, part, parts)).with_batch_size(BATCH),
        ),
        "orders" => {
            Box::new(OrderArrow::new(OrderGenerator::new(sf, part, parts)).with_batch_size(BATCH))
        }
        "lineitem" => Box::new(
            LineItemArrow::new(LineItemGenerator::new(sf, part, parts)).with_batch_size(BATCH),
        ),
        other => unreachable!("no TPC-H table {other}"),
    }
}

/// The writer settings engines use: row groups of 1,048,576 rows, page
/// statistics (the column index) and the offset index, Snappy.
fn writer_properties() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(1 << 20))
        .set_statistics_enabled(EnabledStatistics::Page)
        .build()
}

/// What [`generate`] wrote.
#[derive(Debug, serde::Serialize)]
pub struct Written {
    pub table: &'static str,
    pub files: usize,
    pub rows: u64,
    pub bytes: u64,
}

/// Generates every table at scale factor `sf` as Parquet under
/// `prefix/TABLE/part-N.parquet` in `store` (each file written locally in
/// `tmp` first, then uploaded in parts), calling `progress` per file.
pub async fn generate(
    store: Arc<dyn ObjectStore>,
    prefix: &Path,
    sf: f64,
    tmp: &std::path::Path,
    mut progress: impl FnMut(&str),
) -> anyhow::Result<Vec<Written>> {
    anyhow::ensure!(
        sf > 0.0 && sf <= 1000.0,
        "--sf {sf}: a scale factor from above 0 to 1000"
    );
    let mut out = Vec::new();
    for table in TABLES {
        let parts = files_of(table, sf);
        let mut written = Written {
            table,
            files: 0,
            rows: 0,
            bytes: 0,
        };
        for part in 1..=parts {
            let local = tmp.join(format!("{table}-{part}.parquet"));
            let file = std::fs::File::create(&local)
                .with_context(|| format!("creating {}", local.display()))?;
            let mut iter = batches(table, sf, part, parts).peekable();
            let schema = match iter.peek() {
                Some(Ok(b)) => b.schema(),
                Some(Err(e)) => anyhow::bail!("{table}: {e}"),
                None => continue,
            };
            let mut writer = ArrowWriter::try_new(file, schema, Some(writer_properties()))?;
            for batch in iter {
                let batch = batch?;
                written.rows += batch.num_rows() as u64;
                writer.write(&batch)?;
            }
            writer.close()?;
            let location = prefix
                .clone()
                .join(table)
                .join(format!("part-{part}.parquet").as_str());
            written.bytes += upload(&store, &local, &location).await?;
            written.files += 1;
            std::fs::remove_file(&local).ok();
            progress(&format!("{location}: part {part}/{parts}"));
        }
        out.push(written);
    }
    Ok(out)
}

/// Uploads the local file `local` to `location`, in parts of 16 MiB.
async fn upload(
    store: &Arc<dyn ObjectStore>,
    local: &std::path::Path,
    location: &Path,
) -> anyhow::Result<u64> {
    let mut file =
        std::fs::File::open(local).with_context(|| format!("reading {}", local.display()))?;
    let upload = store
        .put_multipart(location)
        .await
        .with_context(|| format!("uploading {location}"))?;
    let mut writer = WriteMultipart::new_with_chunk_size(upload, 16 << 20);
    let mut buf = vec![0u8; 4 << 20];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        writer.wait_for_capacity(4).await?;
        writer.write(&buf[..n]);
    }
    writer
        .finish()
        .await
        .with_context(|| format!("uploading {location}"))?;
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_query_is_there_and_large_tables_are_split() {
        for n in 1..=22 {
            assert!(query(n).to_lowercase().contains("select"), "q{n}");
        }
        assert_eq!(files_of("lineitem", 0.1), 1);
        assert_eq!(files_of("lineitem", 1.0), 2);
        assert_eq!(files_of("lineitem", 10.0), 15);
        assert_eq!(files_of("nation", 10.0), 1);
    }

    #[test]
    fn a_table_is_generated_with_its_rows() {
        let rows: usize = batches("nation", 0.01, 1, 1)
            .map(|b| b.unwrap().num_rows())
            .sum();
        assert_eq!(rows, 25);
        let rows: usize = batches("orders", 0.01, 1, 1)
            .map(|b| b.unwrap().num_rows())
            .sum();
        assert_eq!(rows, 15_000);
    }
}
