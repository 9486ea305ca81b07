//! mountpoint-wrapper: mounts one bucket (optionally a prefix of it) of an S3-compatible server, such as
//! Garage on 127.0.0.1, with the mountpoint-s3-fs 0.11.0 library: path-style requests over plain HTTP,
//! credentials from the environment, mountpoint's local disk data cache, and a metadata TTL.
//!
//! Written against the API of mountpoint-s3-fs 0.11.0 / mountpoint-s3-client 0.22.x as published on
//! crates.io; it wires them as the mount-s3 command does: a CRT client, the superblock, the filesystem
//! with mountpoint's prefetcher over its disk data cache, and the FUSE session.
//!
//! Credentials: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN) from the environment become
//! a static CRT credentials provider. Without them the CRT default chain is used (environment, profile
//! files, then STS/ECS/IMDS, which on a machine without them only costs timeouts).
//!
//! Example:
//!   AWS_ACCESS_KEY_ID=GK... AWS_SECRET_ACCESS_KEY=... mountpoint-wrapper \
//!     --endpoint http://127.0.0.1:3900 --region garage --bucket tpch --prefix sf1/ \
//!     --mountpoint /mnt/tpch --cache-dir /var/tmp/mp-cache --cache-bytes 10737418240 \
//!     --metadata-ttl-secs 300 --read-only --foreground

use std::io::{Read as _, Write as _};
use std::os::fd::AsRawFd as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use clap::Parser;
use mountpoint_s3_client::S3CrtClient;
use mountpoint_s3_client::config::{
    AddressingStyle, Allocator, CredentialsProvider, CredentialsProviderStaticOptions, S3ClientAuthConfig,
};
use mountpoint_s3_client::user_agent::UserAgent;
use mountpoint_s3_fs::data_cache::{CacheLimit, DataCacheConfig, DiskDataCacheConfig, ManagedCacheDir};
use mountpoint_s3_fs::fs::{CacheConfig, TimeToLive};
use mountpoint_s3_fs::fuse::config::{FuseOptions, FuseSessionConfig, MountPoint};
use mountpoint_s3_fs::fuse::session::FuseSession;
use mountpoint_s3_fs::logging::{LoggingConfig, init_logging};
use mountpoint_s3_fs::memory::{CandidateSize, MINIMUM_MEM_LIMIT, PagedPool, effective_total_memory};
use mountpoint_s3_fs::s3::config::{ClientConfig, MemoryLimitSetting, PartConfig, Region, TargetThroughputSetting};
use mountpoint_s3_fs::s3::{Bucket, Prefix, S3Path, S3Personality};
use mountpoint_s3_fs::{MountpointConfig, Runtime, S3FilesystemConfig, Superblock, SuperblockConfig, metrics};

/// mount-s3's defaults: 8 MiB GET/PUT parts, 1 MiB data cache blocks, 16 FUSE threads.
const PART_SIZE: usize = 8 * 1024 * 1024;
const CACHE_BLOCK_SIZE: u64 = 1024 * 1024;

#[derive(Parser, Debug)]
#[command(about = "Mount an S3-compatible bucket with mountpoint-s3-fs and its local disk cache")]
struct Args {
    /// S3 endpoint, e.g. http://127.0.0.1:3900 (plain HTTP is fine).
    #[arg(long)]
    endpoint: String,
    /// Signing region; Garage's `s3_region` (the garage harness uses "garage").
    #[arg(long, default_value = "garage")]
    region: String,
    #[arg(long)]
    bucket: String,
    /// Key prefix to mount; must be empty or end in '/'.
    #[arg(long, default_value = "")]
    prefix: String,
    /// Existing, empty directory to mount on.
    #[arg(long)]
    mountpoint: PathBuf,
    /// Parent directory of the data cache; mountpoint creates (and on exit removes) `mountpoint-cache` in it.
    #[arg(long)]
    cache_dir: PathBuf,
    /// Upper bound of the data cache in bytes (0: no data cache).
    #[arg(long)]
    cache_bytes: u64,
    /// Metadata TTL: seconds, or "minimal", or "indefinite".
    #[arg(long, default_value = "60")]
    metadata_ttl_secs: String,
    #[arg(long)]
    read_only: bool,
    /// Needs `user_allow_other` in /etc/fuse.conf unless running as root.
    #[arg(long)]
    allow_other: bool,
    /// Stay in the foreground (logs to stdout); otherwise fork and return once mounted, like mount-s3.
    #[arg(long)]
    foreground: bool,
    /// Memory target in bytes for mountpoint's buffer pool (default: 95% of RAM or cgroup limit, >= 512 MiB).
    #[arg(long)]
    memory_target_bytes: Option<usize>,
    /// Target throughput the CRT sizes its connection pool for.
    #[arg(long, default_value_t = 10.0)]
    throughput_gbps: f64,
    #[arg(long, default_value_t = 16)]
    max_threads: usize,
    /// Log filter (tracing EnvFilter syntax); MOUNTPOINT_LOG overrides it.
    #[arg(long, default_value = "warn,mountpoint_s3_fs=info,awscrt=off")]
    log_filter: String,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.foreground {
        let _logging = init_logging(logging_config(&args, true)).context("failed to initialize logging")?;
        let _metrics = metrics::install(None).map_err(|e| anyhow!("failed to initialize metrics: {e}"))?;
        let session = mount(&args)?;
        println!("{} is mounted at {}", args.bucket, args.mountpoint.display());
        // Returns on unmount (fusermount3 -u / umount) or SIGINT/SIGTERM, which create_fuse_session routes here.
        return session.join().context("failed to join FUSE session");
    }
    daemonize_and_mount(args)
}

/// Fork before anything creates CRT threads, mount in the child, report to the parent over a pipe.
fn daemonize_and_mount(args: Args) -> anyhow::Result<()> {
    let (mut reader, mut writer) = std::io::pipe().context("failed to create a pipe")?;
    // SAFETY: single-threaded so far (no logging, CRT or FUSE threads yet).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        bail!("fork failed: {}", std::io::Error::last_os_error());
    }
    if pid == 0 {
        drop(reader);
        let _logging = init_logging(logging_config(&args, false)).context("failed to initialize logging")?;
        let _metrics = metrics::install(None).map_err(|e| anyhow!("failed to initialize metrics: {e}"))?;
        match mount(&args) {
            Ok(session) => {
                writer.write_all(b"0").context("failed to notify parent")?;
                drop(writer);
                // SAFETY: the session no longer needs the terminal; detach from it.
                unsafe {
                    libc::setsid();
                    let devnull = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
                    if devnull >= 0 {
                        for fd in [std::io::stdin().as_raw_fd(), std::io::stdout().as_raw_fd(), std::io::stderr().as_raw_fd()] {
                            libc::dup2(devnull, fd);
                        }
                    }
                }
                session.join().context("failed to join FUSE session")
            }
            Err(e) => {
                let _ = writer.write_all(b"1");
                Err(e)
            }
        }
    } else {
        drop(writer);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut status = [b'1'];
            let _ = reader.read_exact(&mut status);
            let _ = tx.send(status[0]);
        });
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(b'0') => {
                println!("{} is mounted at {}", args.bucket, args.mountpoint.display());
                Ok(())
            }
            Ok(_) => {
                let mut status = 0;
                // SAFETY: waiting for our own child.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                bail!("mount process failed (see syslog, or run with --foreground)")
            }
            Err(_) => {
                // SAFETY: signalling our own child.
                unsafe { libc::kill(pid, libc::SIGTERM) };
                bail!("timed out after 30 s waiting for the mount process")
            }
        }
    }
}

fn logging_config(args: &Args, to_stdout: bool) -> LoggingConfig {
    // log_file None: syslog (silently skipped when there is none) plus stdout in the foreground.
    LoggingConfig { log_file: None, log_to_stdout: to_stdout, default_filter: args.log_filter.clone() }
}

fn mount(args: &Args) -> anyhow::Result<FuseSession> {
    let s3_path = S3Path::new(
        Bucket::new(args.bucket.clone()).context("invalid bucket name")?,
        Prefix::new(&args.prefix).context("invalid prefix (must be empty or end in '/')")?,
    );

    // Memory: as mount-s3 --memory-target does, validate the part size against the budget before the pool.
    let memory_limit = match args.memory_target_bytes {
        Some(bytes) => MemoryLimitSetting::User(bytes),
        None => MemoryLimitSetting::Default(((effective_total_memory() as f64 * 0.95) as usize).max(MINIMUM_MEM_LIMIT)),
    };
    let part_config = PartConfig::with_part_size(PART_SIZE).validate(memory_limit)?;
    let pool = PagedPool::config()
        .with_candidate_sizes([
            CandidateSize::prunable(CACHE_BLOCK_SIZE as usize),
            CandidateSize::prunable(part_config.read_size_bytes),
            CandidateSize::new(part_config.write_size_bytes),
        ])
        .with_memory_limit(memory_limit.bytes())
        .with_maintenance_interval(Duration::from_secs(60))
        .build();

    let client_config = ClientConfig {
        region: Region::new_user_specified(args.region.clone()),
        endpoint_url: Some(args.endpoint.clone()),
        addressing_style: AddressingStyle::Path,
        dual_stack: false,
        transfer_acceleration: false,
        auth_config: auth_config_from_env()?,
        requester_pays: false,
        expected_bucket_owner: None,
        throughput_target: TargetThroughputSetting::User { gbps: args.throughput_gbps },
        bind: None,
        part_config,
        user_agent: UserAgent::new(Some("mountpoint-wrapper".to_string())),
        tls_config: None,
    };
    // Some(&s3_path): a ListObjectsV2 on bucket/prefix before mounting, so a bad endpoint, key or bucket fails here.
    let client: S3CrtClient = client_config
        .create_client(pool.clone(), Some(&s3_path))
        .context("failed to create S3 client")?;
    let runtime = Runtime::new(client.event_loop_group());

    let cache_config = CacheConfig::new(parse_ttl(&args.metadata_ttl_secs)?);
    let filesystem_config = S3FilesystemConfig {
        cache_config: cache_config.clone(),
        // Standard: ordered listings, additional checksums. Garage lists in key order.
        s3_personality: S3Personality::Standard,
        // Garage accepts x-amz-checksum-crc32c, but uploads are not the point here.
        upload_checksum_algorithm: None,
        read_only: args.read_only,
        ..Default::default()
    };

    let mut data_cache_config = DataCacheConfig::default();
    if args.cache_bytes > 0 {
        data_cache_config.disk_cache_config = Some(DiskDataCacheConfig {
            cache_directory: args.cache_dir.clone(),
            block_size: CACHE_BLOCK_SIZE,
            limit: CacheLimit::TotalSize { max_size: args.cache_bytes as usize },
        });
    }
    // As mount-s3: a fresh `<cache-dir>/mountpoint-cache` (emptied now and when the session closes).
    let managed_cache_dir = match &mut data_cache_config.disk_cache_config {
        Some(disk) => {
            let dir = ManagedCacheDir::new_from_parent_with_cache_key(&disk.cache_directory, None, true)
                .context("failed to create the cache directory")?;
            disk.cache_directory = dir.as_path_buf();
            Some(dir)
        }
        None => None,
    };

    let fuse_options = FuseOptions {
        read_only: args.read_only, // must equal S3FilesystemConfig::read_only (checked by MountpointConfig::new)
        allow_other: args.allow_other,
        ..Default::default()
    };
    let mount_point = MountPoint::new(&args.mountpoint).context("invalid mount point")?;
    let fuse_session_config = FuseSessionConfig::new(mount_point, fuse_options, args.max_threads)?;

    let superblock = Superblock::new(
        client.clone(),
        s3_path,
        SuperblockConfig { cache_config, s3_personality: filesystem_config.s3_personality },
    );
    // Builds the prefetcher (Prefetcher::caching_builder over a DiskDataCache when the disk cache is
    // configured), the S3Filesystem, the fuser Session (mounts now) and its worker threads, and installs
    // a SIGINT/SIGTERM handler that makes FuseSession::join return.
    let mut session = MountpointConfig::new(fuse_session_config, filesystem_config, data_cache_config)?
        .create_fuse_session(superblock, client, runtime, pool)
        .context("failed to create the FUSE session")?;
    if let Some(dir) = managed_cache_dir {
        session.run_on_close(Box::new(move || drop(dir)));
    }
    Ok(session)
}

fn auth_config_from_env() -> anyhow::Result<S3ClientAuthConfig> {
    let (Ok(key), Ok(secret)) = (std::env::var("AWS_ACCESS_KEY_ID"), std::env::var("AWS_SECRET_ACCESS_KEY")) else {
        return Ok(S3ClientAuthConfig::Default);
    };
    let token = std::env::var("AWS_SESSION_TOKEN").ok();
    let provider = CredentialsProvider::new_static(
        &Allocator::default(),
        CredentialsProviderStaticOptions {
            access_key_id: &key,
            secret_access_key: &secret,
            session_token: token.as_deref(),
        },
    )
    .map_err(|e| anyhow!("failed to create a static credentials provider: {e}"))?;
    Ok(S3ClientAuthConfig::Provider(provider))
}

fn parse_ttl(s: &str) -> anyhow::Result<TimeToLive> {
    let ttl = TimeToLive::new_from_str(s).map_err(|e| anyhow!("--metadata-ttl-secs: {e}"))?;
    // mount-s3 reads "0" as "minimal" (Linux misbehaves with a zero kernel TTL).
    Ok(match ttl {
        TimeToLive::Duration(d) if d.is_zero() => TimeToLive::Minimal,
        other => other,
    })
}
