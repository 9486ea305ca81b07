//! The mount helper: `multiarc` as mount(8) and mount.fuse3 call it for a
//! line of `/etc/fstab`, turned into `multiarc mount`.
//!
//! - type `fuse.multiarc`: mount(8) runs `mount.fuse3`, which runs
//!   `multiarc SOURCE MOUNTPOINT -o OPTIONS` (the `multiarc` in `PATH`);
//! - type `multiarc`: mount(8) runs `/sbin/mount.multiarc SOURCE MOUNTPOINT
//!   [-sfnv] -o OPTIONS` (a link to `multiarc`);
//! - type `fuse.multiarc` also finds `/sbin/mount.fuse.multiarc` first, if
//!   that link exists.
//!
//! Each option is a flag of `multiarc mount`, `_` for `-` (`max_bytes=1G`
//! is `--max-bytes 1G`, `allow_other` is `--allow-other`), `ro` is
//! `--read-only`; the options mount(8) keeps for itself (`defaults`,
//! `noauto`, `nofail`, `_netdev`, `x-systemd.*`, ...) are left out. The
//! mount starts in the background and the helper returns once it is ready,
//! as mount(8) expects.

use std::ffi::OsString;

/// Names the binary is called by as a helper.
const HELPER_NAMES: [&str; 2] = ["mount.multiarc", "mount.fuse.multiarc"];

/// Options mount(8) and mount.fuse3 handle themselves, or that mean
/// nothing to a FUSE mount of ours: left out.
const IGNORED: [&str; 28] = [
    "rw",
    "defaults",
    "fsname",
    "subtype",
    "auto",
    "noauto",
    "user",
    "nouser",
    "users",
    "owner",
    "group",
    "_netdev",
    "nofail",
    "dev",
    "nodev",
    "suid",
    "nosuid",
    "exec",
    "noexec",
    "async",
    "sync",
    "atime",
    "noatime",
    "relatime",
    "strictatime",
    "lazytime",
    "diratime",
    "nodiratime",
];

/// `args` as `multiarc mount ...` when they are a mount helper's call
/// (see the module docs); otherwise unchanged. `subcommands` are the
/// command's own (a first argument naming one is no helper call).
pub fn as_mount_command(
    args: Vec<OsString>,
    subcommands: &[String],
) -> Result<Vec<OsString>, String> {
    let program = args
        .first()
        .map(std::path::Path::new)
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let rest: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let by_name = HELPER_NAMES.contains(&program.as_str());
    let by_shape = !by_name
        && rest.len() >= 2
        && !rest[0].starts_with('-')
        && !subcommands.contains(&rest[0])
        && !rest[1].starts_with('-');
    if !by_name && !by_shape {
        return Ok(args);
    }
    let mut positional = Vec::new();
    let mut flags = Vec::new();
    let mut it = rest.into_iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-o" => {
                let opts = it.next().ok_or("-o needs the mount options")?;
                flags.extend(options_as_flags(&opts)?);
            }
            a if a.starts_with("-o") && a.len() > 2 => flags.extend(options_as_flags(&a[2..])?),
            // mount(8)'s own: sloppy, fake, no mtab, verbose.
            "-s" | "-f" | "-n" | "-v" => {}
            "-t" => {
                it.next();
            }
            "-N" => return Err("-N (another mount namespace) is not supported".into()),
            a if a.starts_with('-') => return Err(format!("unknown mount helper flag {a}")),
            _ => positional.push(arg),
        }
    }
    let [source, mountpoint] = <[String; 2]>::try_from(positional).map_err(|p| {
        format!(
            "a mount helper takes SOURCE MOUNTPOINT [-o OPTIONS], got {} arguments",
            p.len()
        )
    })?;
    let mut out: Vec<OsString> = vec![
        args[0].clone(),
        "mount".into(),
        source.into(),
        mountpoint.into(),
    ];
    out.extend(flags.into_iter().map(OsString::from));
    Ok(out)
}

/// `max_bytes=1G,allow_other,ro` as `--max-bytes 1G --allow-other
/// --read-only`.
fn options_as_flags(options: &str) -> Result<Vec<String>, String> {
    let mut flags = Vec::new();
    for option in options.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        let (key, value) = match option.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (option, None),
        };
        if IGNORED.contains(&key) || key.starts_with("x-") || key == "comment" {
            continue;
        }
        if key == "ro" {
            flags.push("--read-only".to_string());
            continue;
        }
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!("mount option {option:?} is not NAME or NAME=VALUE"));
        }
        flags.push(format!("--{}", key.replace('_', "-")));
        if let Some(v) = value {
            flags.push(v.to_string());
        }
    }
    Ok(flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    fn subcommands() -> Vec<String> {
        ["bench", "mount", "stats"].map(String::from).to_vec()
    }

    #[test]
    fn mount_fuse3s_call_is_a_mount_command() {
        let out = as_mount_command(
            os(&[
                "multiarc",
                "/srv/d",
                "/mnt/d",
                "-o",
                "rw,max_bytes=1GiB,allow_other,noauto,x-systemd.automount",
            ]),
            &subcommands(),
        )
        .unwrap();
        assert_eq!(
            out,
            os(&[
                "multiarc",
                "mount",
                "/srv/d",
                "/mnt/d",
                "--max-bytes",
                "1GiB",
                "--allow-other"
            ])
        );
    }

    #[test]
    fn mount_8s_call_of_the_named_helper_is_a_mount_command() {
        let out = as_mount_command(
            os(&[
                "/sbin/mount.multiarc",
                "s3://b/p",
                "/mnt/b",
                "-n",
                "-o",
                "ro,endpoint=http://127.0.0.1:3900,metadata_ttl=0",
            ]),
            &subcommands(),
        )
        .unwrap();
        assert_eq!(
            out,
            os(&[
                "/sbin/mount.multiarc",
                "mount",
                "s3://b/p",
                "/mnt/b",
                "--read-only",
                "--endpoint",
                "http://127.0.0.1:3900",
                "--metadata-ttl",
                "0"
            ])
        );
    }

    #[test]
    fn commands_are_left_alone_and_bad_calls_say_why() {
        for args in [
            &["multiarc", "mount", "/a", "/b"][..],
            &["multiarc", "bench", "--json"],
            &["multiarc", "--help"],
            &["multiarc"],
            &["multiarc", "stats", "/mnt"],
        ] {
            assert_eq!(
                as_mount_command(os(args), &subcommands()).unwrap(),
                os(args)
            );
        }
        let bad = |args: &[&str]| as_mount_command(os(args), &subcommands()).unwrap_err();
        assert!(bad(&["mount.multiarc", "/a"]).contains("SOURCE MOUNTPOINT"));
        assert!(bad(&["mount.multiarc", "/a", "/b", "-o"]).contains("-o needs"));
        assert!(bad(&["mount.multiarc", "/a", "/b", "-o", "a b"]).contains("not NAME"));
        assert!(bad(&["mount.multiarc", "/a", "/b", "-N", "1"]).contains("namespace"));
    }
}
