//! The inode table: what the kernel knows of the bucket's namespace.
//!
//! A directory is a key prefix ending at a `/`; a file is an object. Each
//! (parent, name) the kernel met has an inode number for as long as the
//! kernel holds it (its lookups) or the name stays in the table. What the
//! store said about a name (kind, size, mtime, ETag) is kept with the time
//! it was said, and trusted for the metadata TTL. Names that exist only
//! here (a file being written, a directory made with `mkdir` that holds no
//! object yet) are local and not subject to the TTL.

use crate::dense::Density;
use crate::served::ServedBlocks;
use crate::Kind;
use object_store::path::Path;
use object_store::{ListResult, ObjectMeta};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

/// The root's inode number.
pub const ROOT_INO: u64 = 1;
/// The first inode number of the bucket's names (those below it, but the
/// root, are free for a mount's own control files).
pub const FIRST_INO: u64 = 16;

/// What the kernel was last told of a file's size and mtime, which it
/// caches for the TTL (see `BucketFs::open_file`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Told {
    /// Nothing it may still hold: never told, or asked to ask again.
    Nothing,
    /// This size and mtime.
    Attrs(u64, SystemTime),
    /// A size the kernel set itself: a replacement written through this
    /// mount (its truncating open sets 0, each write the bytes so far).
    Unknown,
}

/// What the store said about an object.
#[derive(Clone, Debug)]
pub(crate) struct Remote {
    pub(crate) size: u64,
    pub(crate) mtime: SystemTime,
}

#[derive(Debug)]
pub(crate) struct Node {
    pub(crate) parent: u64,
    pub(crate) name: String,
    /// The object's key, or the directory's prefix (without its `/`; empty
    /// for the root of a whole bucket).
    pub(crate) path: Path,
    pub(crate) kind: Kind,
    /// For files: the object as last seen in the store (`None` for a new
    /// file not uploaded yet).
    pub(crate) remote: Option<Remote>,
    /// When the store last confirmed this name (`None`: never; local).
    pub(crate) checked: Option<Instant>,
    /// A file open for writing: its size so far.
    pub(crate) writing: Option<u64>,
    /// A directory made here that the store may not know yet.
    pub(crate) local_dir: bool,
    /// The object's metadata as the last open got it from the store: what
    /// an open falls back to while the store cannot be reached.
    pub(crate) opened: Option<ObjectMeta>,
    /// The only version whose bytes the kernel's page cache of this file
    /// may hold (see `BucketFs::open_file`), and how many handles read it
    /// through that cache now.
    pub(crate) page_version: Option<ObjectMeta>,
    pub(crate) page_readers: u32,
    /// The blocks of `page_version` its pages were given since the last
    /// open that kept them (see `crate::served`).
    pub(crate) served: ServedBlocks,
    /// An open is having the kernel drop the file's pages: until it is
    /// done, other opens read with direct I/O.
    pub(crate) dropping_pages: bool,
    /// Opens for writing (replacing the object) waiting until no handle
    /// reads the file through the page cache: meanwhile new readers get
    /// direct I/O.
    pub(crate) overwrites_waiting: u32,
    /// A file's size and mtime as the kernel holds them: an open that
    /// finds them changed tells the kernel to ask again.
    pub(crate) told: Told,
    /// The kernel's references (lookups not yet forgotten).
    pub(crate) lookups: u64,
    /// For directories: the store's last listing of the prefix and when it
    /// was made, reused by opens of the directory for the metadata TTL
    /// (dropped when this mount changes a name in it).
    pub(crate) listing: Option<(Instant, Arc<ListResult>)>,
    /// For files: the random misses of the version last opened, which its
    /// handles share (see `crate::dense`).
    pub(crate) density: Option<(ObjectMeta, Arc<Mutex<Density>>)>,
}

impl Node {
    /// Whether the name exists only here for now (never expires).
    pub(crate) fn is_local(&self) -> bool {
        self.writing.is_some() || self.local_dir
    }
}

pub(crate) struct Inodes {
    nodes: HashMap<u64, Node>,
    children: HashMap<(u64, String), u64>,
    next_ino: u64,
}

impl Inodes {
    pub(crate) fn new(root: Path) -> Inodes {
        let mut nodes = HashMap::new();
        nodes.insert(
            ROOT_INO,
            Node {
                parent: ROOT_INO,
                name: String::new(),
                path: root,
                kind: Kind::Directory,
                remote: None,
                checked: None,
                writing: None,
                local_dir: true,
                opened: None,
                page_version: None,
                page_readers: 0,
                served: ServedBlocks::default(),
                dropping_pages: false,
                overwrites_waiting: 0,
                told: Told::Nothing,
                lookups: 1,
                listing: None,
                density: None,
            },
        );
        Inodes {
            nodes,
            children: HashMap::new(),
            next_ino: FIRST_INO,
        }
    }

    pub(crate) fn get(&self, ino: u64) -> Option<&Node> {
        self.nodes.get(&ino)
    }

    pub(crate) fn get_mut(&mut self, ino: u64) -> Option<&mut Node> {
        self.nodes.get_mut(&ino)
    }

    pub(crate) fn child(&self, parent: u64, name: &str) -> Option<u64> {
        self.children.get(&(parent, name.to_string())).copied()
    }

    /// The inode of `name` in `parent` as a `kind`: the one it had if it was
    /// of that kind, else a new number (a file that became a directory is
    /// another object to the kernel).
    pub(crate) fn upsert(&mut self, parent: u64, name: &str, path: Path, kind: Kind) -> u64 {
        let key = (parent, name.to_string());
        if let Some(&ino) = self.children.get(&key) {
            if let Some(node) = self.nodes.get(&ino) {
                if node.kind == kind {
                    return ino;
                }
            }
            self.detach(parent, name);
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.nodes.insert(
            ino,
            Node {
                parent,
                name: name.to_string(),
                path,
                kind,
                remote: None,
                checked: None,
                writing: None,
                local_dir: false,
                opened: None,
                page_version: None,
                page_readers: 0,
                served: ServedBlocks::default(),
                dropping_pages: false,
                overwrites_waiting: 0,
                told: Told::Nothing,
                lookups: 0,
                listing: None,
                density: None,
            },
        );
        self.children.insert(key, ino);
        ino
    }

    /// Forgets `dir`'s listing: a name in it changed through this mount.
    pub(crate) fn relist(&mut self, dir: u64) {
        if let Some(node) = self.nodes.get_mut(&dir) {
            node.listing = None;
        }
    }

    /// Takes `name` out of `parent` (it is gone from the store): the inode
    /// lives on while the kernel holds it.
    pub(crate) fn detach(&mut self, parent: u64, name: &str) {
        self.relist(parent);
        if let Some(ino) = self.children.remove(&(parent, name.to_string())) {
            if self.nodes.get(&ino).is_some_and(|n| n.lookups == 0) {
                self.nodes.remove(&ino);
            }
        }
    }

    /// The local children of `parent` (being written, or made by mkdir).
    pub(crate) fn local_children(&self, parent: u64) -> Vec<(u64, String, Kind)> {
        let mut out: Vec<_> = self
            .children
            .iter()
            .filter(|((p, _), _)| *p == parent)
            .filter_map(|((_, name), ino)| {
                let node = self.nodes.get(ino)?;
                node.is_local().then(|| (*ino, name.clone(), node.kind))
            })
            .collect();
        out.sort_by(|a, b| a.1.cmp(&b.1));
        out
    }

    /// Whether `parent` has any child name in the table that is local.
    pub(crate) fn has_local_children(&self, parent: u64) -> bool {
        !self.local_children(parent).is_empty()
    }

    /// The kernel dropped `n` references to `ino`: at none, an inode whose
    /// name is gone (or that exists only as a stale listing entry) is
    /// dropped.
    pub(crate) fn forget(&mut self, ino: u64, n: u64) {
        if ino == ROOT_INO {
            return;
        }
        let Some(node) = self.nodes.get_mut(&ino) else {
            return;
        };
        node.lookups = node.lookups.saturating_sub(n);
        if node.lookups > 0 || node.is_local() {
            return;
        }
        let key = (node.parent, node.name.clone());
        if self.children.get(&key) == Some(&ino) {
            self.children.remove(&key);
        }
        self.nodes.remove(&ino);
    }

    /// Inodes in the table (for statistics).
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }
}
