//! The messages of pprof's `profile.proto` (package `perftools.profiles`, in
//! `github.com/google/pprof/proto/profile.proto`) as `prost` structs written by hand (no build
//! script), and the encoding of a [`Profile`] into them ([`encode`]) with the process's
//! executable mappings ([`parse_maps`]) and their build ids. Fields we never write (a sample's
//! labels, a line's column) are left out; a decoder skips them.
//!
//! Strings are indices into [`Profile::string_table`], whose entry 0 is `""`;
//! ids are 1-based and 0 means none.

use std::collections::HashMap;

use crate::prof::{Frame, Profile as Heap};

/// A whole profile.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Profile {
    /// What each of a sample's values is (kind and unit), in the order of the values.
    #[prost(message, repeated, tag = "1")]
    pub(super) sample_type: Vec<ValueType>,
    /// The samples: a stack and its values.
    #[prost(message, repeated, tag = "2")]
    pub(super) sample: Vec<Sample>,
    /// The executable mappings the addresses fall in.
    #[prost(message, repeated, tag = "3")]
    pub(super) mapping: Vec<Mapping>,
    /// The distinct addresses of the stacks, with what they resolved to.
    #[prost(message, repeated, tag = "4")]
    pub(super) location: Vec<Location>,
    /// The distinct functions of the locations' lines.
    #[prost(message, repeated, tag = "5")]
    pub(super) function: Vec<Function>,
    /// Every string the other fields refer to by index; entry 0 is `""`.
    #[prost(string, repeated, tag = "6")]
    pub(super) string_table: Vec<String>,
    /// A regular expression of frames for readers to drop (string index; 0: none).
    #[prost(int64, tag = "7")]
    pub(super) drop_frames: i64,
    /// A regular expression of frames to keep despite `drop_frames` (string index; 0: none).
    #[prost(int64, tag = "8")]
    pub(super) keep_frames: i64,
    /// When the profile was taken, in nanoseconds since the Unix epoch.
    #[prost(int64, tag = "9")]
    pub(super) time_nanos: i64,
    /// The time the profile covers, in nanoseconds.
    #[prost(int64, tag = "10")]
    pub(super) duration_nanos: i64,
    /// What `period` counts (kind and unit).
    #[prost(message, optional, tag = "11")]
    pub(super) period_type: Option<ValueType>,
    /// The sampling period, in `period_type`'s unit.
    #[prost(int64, tag = "12")]
    pub(super) period: i64,
    /// Free-form comments (string indices).
    #[prost(int64, repeated, tag = "13")]
    pub(super) comment: Vec<i64>,
    /// The sample type readers show first (string index of its `type`).
    #[prost(int64, tag = "14")]
    pub(super) default_sample_type: i64,
}

/// A kind of value and its unit, both string indices (`alloc_space` in `bytes`, say).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ValueType {
    /// The kind (string index).
    #[prost(int64, tag = "1")]
    pub(super) r#type: i64,
    /// The unit (string index).
    #[prost(int64, tag = "2")]
    pub(super) unit: i64,
}

/// One stack and its values.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Sample {
    /// The stack's locations, innermost first.
    #[prost(uint64, repeated, tag = "1")]
    pub(super) location_id: Vec<u64>,
    /// One value per entry of [`Profile::sample_type`], in its order.
    #[prost(int64, repeated, tag = "2")]
    pub(super) value: Vec<i64>,
}

/// A file mapped executable into the process.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Mapping {
    /// The mapping's id (1-based).
    #[prost(uint64, tag = "1")]
    pub(super) id: u64,
    /// The first address of the mapping.
    #[prost(uint64, tag = "2")]
    pub(super) memory_start: u64,
    /// The address one past the mapping's end.
    #[prost(uint64, tag = "3")]
    pub(super) memory_limit: u64,
    /// The offset in the file of the mapping's first byte.
    #[prost(uint64, tag = "4")]
    pub(super) file_offset: u64,
    /// The file's path (string index).
    #[prost(int64, tag = "5")]
    pub(super) filename: i64,
    /// The file's build id in hex (string index; 0: unknown).
    #[prost(int64, tag = "6")]
    pub(super) build_id: i64,
    /// The locations in the mapping carry their functions.
    #[prost(bool, tag = "7")]
    pub(super) has_functions: bool,
    /// The locations in the mapping carry their source files.
    #[prost(bool, tag = "8")]
    pub(super) has_filenames: bool,
    /// The locations in the mapping carry their source lines.
    #[prost(bool, tag = "9")]
    pub(super) has_line_numbers: bool,
    /// The locations in the mapping carry their inlined frames.
    #[prost(bool, tag = "10")]
    pub(super) has_inline_frames: bool,
}

/// One address of a stack and the frames it resolved to.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Location {
    /// The location's id (1-based).
    #[prost(uint64, tag = "1")]
    pub(super) id: u64,
    /// The mapping holding the address (0: none known).
    #[prost(uint64, tag = "2")]
    pub(super) mapping_id: u64,
    /// The instruction address (of the call, for a caller).
    #[prost(uint64, tag = "3")]
    pub(super) address: u64,
    /// The frames at the address, innermost (the most deeply inlined) first; none when the
    /// address did not resolve.
    #[prost(message, repeated, tag = "4")]
    pub(super) line: Vec<Line>,
    /// The address stands for several addresses folded into one.
    #[prost(bool, tag = "5")]
    pub(super) is_folded: bool,
}

/// One frame of a location.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Line {
    /// The frame's function.
    #[prost(uint64, tag = "1")]
    pub(super) function_id: u64,
    /// The source line (0: unknown).
    #[prost(int64, tag = "2")]
    pub(super) line: i64,
}

/// A function of the program.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Function {
    /// The function's id (1-based).
    #[prost(uint64, tag = "1")]
    pub(super) id: u64,
    /// Its name as people read it (string index).
    #[prost(int64, tag = "2")]
    pub(super) name: i64,
    /// Its name as the system knows it (string index).
    #[prost(int64, tag = "3")]
    pub(super) system_name: i64,
    /// Its source file (string index; 0: unknown).
    #[prost(int64, tag = "4")]
    pub(super) filename: i64,
    /// The line it starts at (0: unknown).
    #[prost(int64, tag = "5")]
    pub(super) start_line: i64,
}

/// An executable, file-backed region of the process (a line of `/proc/self/maps`).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Region {
    /// First address.
    pub(super) start: u64,
    /// One past the last address.
    pub(super) end: u64,
    /// Offset in the file of the first byte.
    pub(super) offset: u64,
    /// The file's path.
    pub(super) path: String,
}

/// The executable (`r-xp`), file-backed regions of a `/proc/<pid>/maps`, in its order (that
/// of their addresses).
pub(super) fn parse_maps(maps: &str) -> Vec<Region> {
    let hex = |s: &str| u64::from_str_radix(s, 16).ok();
    let region = |line: &str| {
        // `start-end perms offset dev inode`, then the path after padding (it may hold spaces).
        let mut f = line.splitn(6, ' ');
        let (range, perms, offset) = (f.next()?, f.next()?, f.next()?);
        let path = f.nth(2)?.trim_start();
        if perms != "r-xp" || !path.starts_with('/') {
            return None;
        }
        let (start, end) = range.split_once('-')?;
        Some(Region {
            start: hex(start)?,
            end: hex(end)?,
            offset: hex(offset)?,
            path: path.to_string(),
        })
    };
    maps.lines().filter_map(region).collect()
}

/// The GNU build id (`NT_GNU_BUILD_ID` note) of the ELF file at `path`, in hex, found through
/// its program headers' `PT_NOTE` segments; `None` when it has none or is not a 64-bit
/// little-endian ELF file.
fn build_id(path: &str) -> Option<String> {
    use std::os::unix::fs::FileExt;
    const PT_NOTE: u64 = 4;
    let file = std::fs::File::open(path).ok()?;
    let read = |at: u64, len: u64| {
        let mut b = vec![0; usize::try_from(len).ok()?];
        file.read_exact_at(&mut b, at).ok().map(|()| b)
    };
    let eh = read(0, 64)?;
    if eh[..6] != *b"\x7fELF\x02\x01" {
        return None;
    }
    let (phoff, phentsize, phnum) = (le(&eh, 0x20, 8), le(&eh, 0x36, 2), le(&eh, 0x38, 2));
    if phentsize < 56 {
        return None;
    }
    (0..phnum).find_map(|i| {
        let ph = read(phoff.checked_add(i * phentsize)?, 56)?;
        if le(&ph, 0, 4) != PT_NOTE {
            return None;
        }
        let (offset, size, align) = (le(&ph, 8, 8), le(&ph, 32, 8), le(&ph, 48, 8));
        let notes = read(offset, size.min(1 << 16))?;
        gnu_build_id(&notes, if align == 8 { 8 } else { 4 })
    })
}

/// The build id among the notes of a `PT_NOTE` segment whose entries are aligned to `align`.
fn gnu_build_id(notes: &[u8], align: usize) -> Option<String> {
    const NT_GNU_BUILD_ID: u64 = 3;
    let mut at = 0;
    while at + 12 <= notes.len() {
        let namesz = le(notes, at, 4) as usize;
        let descsz = le(notes, at + 4, 4) as usize;
        let name = at + 12;
        let desc = name + namesz.next_multiple_of(align);
        if desc + descsz > notes.len() {
            return None;
        }
        if le(notes, at + 8, 4) == NT_GNU_BUILD_ID && notes[name..name + namesz] == *b"GNU\0" {
            return Some(
                notes[desc..desc + descsz]
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect(),
            );
        }
        at = desc + descsz.next_multiple_of(align);
    }
    None
}

/// The little-endian integer of `n` bytes at `at` of `b` (which holds them).
fn le(b: &[u8], at: usize, n: usize) -> u64 {
    b[at..at + n]
        .iter()
        .rev()
        .fold(0, |v, &x| (v << 8) | u64::from(x))
}

/// A value for an `int64` field.
fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The tables of a profile being encoded, each entry written once.
#[derive(Default)]
struct Tables {
    /// The string table.
    strings: Vec<String>,
    /// Each string's index.
    string_ids: HashMap<String, i64>,
    /// The functions.
    functions: Vec<Function>,
    /// Each function's id, by its name's and file's string indices.
    function_ids: HashMap<(i64, i64), u64>,
    /// The locations.
    locations: Vec<Location>,
    /// Each location's id, by the frames at its address.
    location_ids: HashMap<Vec<Frame>, u64>,
}

impl Tables {
    /// The index of `s` in the string table.
    fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.string_ids.get(s) {
            return i;
        }
        let i = self.strings.len() as i64;
        self.strings.push(s.to_string());
        self.string_ids.insert(s.to_string(), i);
        i
    }

    /// The id of the function named `name`, of the source file `file`.
    fn function(&mut self, name: &str, file: Option<&str>) -> u64 {
        let key = (self.string(name), file.map_or(0, |f| self.string(f)));
        let next = self.functions.len() as u64 + 1;
        let id = *self.function_ids.entry(key).or_insert(next);
        if id == next {
            self.functions.push(Function {
                id,
                name: key.0,
                // None: pprof takes a function whose system name is its name for one still to
                // demangle, and cuts `<...>` and `(...)` out of any name holding `::` as if it
                // were C++ (`<Vec<T> as Clone>::clone` would show as `::clone`). The mangled
                // symbol would do, but frames do not carry it.
                system_name: 0,
                filename: key.1,
                start_line: 0,
            });
        }
        id
    }

    /// The id of the location of `frames` (all at one address, innermost first), in the
    /// region of `regions` that holds it.
    fn location(&mut self, frames: &[Frame], regions: &[Region]) -> u64 {
        if let Some(&id) = self.location_ids.get(frames) {
            return id;
        }
        let address = frames[0].addr as u64;
        let after = regions.partition_point(|r| r.start <= address);
        let mapping_id = match after.checked_sub(1) {
            Some(i) if address < regions[i].end => i as u64 + 1,
            _ => 0,
        };
        let line = frames
            .iter()
            .filter_map(|f| {
                let name = f.function.as_deref()?;
                Some(Line {
                    function_id: self.function(name, f.file.as_deref()),
                    line: f.line.map_or(0, i64::from),
                })
            })
            .collect();
        let id = self.locations.len() as u64 + 1;
        self.locations.push(Location {
            id,
            mapping_id,
            address,
            line,
            is_folded: false,
        });
        self.location_ids.insert(frames.to_vec(), id);
        id
    }
}

/// The protobuf message of `p`, whose addresses lie in `regions` (sorted by address).
pub(super) fn encode(p: &Heap, regions: &[Region]) -> Profile {
    let mut t = Tables::default();
    t.string("");
    let value_type = |t: &mut Tables, ty: &str, unit: &str| ValueType {
        r#type: t.string(ty),
        unit: t.string(unit),
    };
    let sample_type = vec![
        value_type(&mut t, "alloc_objects", "count"),
        value_type(&mut t, "alloc_space", "bytes"),
        value_type(&mut t, "inuse_objects", "count"),
        value_type(&mut t, "inuse_space", "bytes"),
    ];
    let period_type = Some(value_type(&mut t, "space", "bytes"));
    let mut ids: HashMap<&str, i64> = HashMap::new();
    let mapping = (1..)
        .zip(regions)
        .map(|(id, r)| {
            let build_id = *ids
                .entry(&r.path)
                .or_insert_with(|| match build_id(&r.path) {
                    Some(b) => t.string(&b),
                    None => 0,
                });
            Mapping {
                id,
                memory_start: r.start,
                memory_limit: r.end,
                file_offset: r.offset,
                filename: t.string(&r.path),
                build_id,
                has_functions: true,
                has_filenames: true,
                has_line_numbers: true,
                has_inline_frames: true,
            }
        })
        .collect();
    let sample = p
        .samples
        .iter()
        .map(|s| Sample {
            location_id: (s.frames.chunk_by(|a, b| a.addr == b.addr))
                .map(|frames| t.location(frames, regions))
                .collect(),
            value: [
                s.alloc_objects,
                s.alloc_bytes,
                s.inuse_objects,
                s.inuse_bytes,
            ]
            .map(i64_of)
            .to_vec(),
        })
        .collect();
    let duration_nanos = match p.start_nanos {
        0 => 0,
        start => p.time_nanos.saturating_sub(start).max(0),
    };
    Profile {
        sample_type,
        sample,
        mapping,
        time_nanos: p.time_nanos,
        duration_nanos,
        period_type,
        period: i64_of(p.rate),
        default_sample_type: t.string("inuse_space"),
        location: t.locations,
        function: t.functions,
        string_table: t.strings,
        ..Profile::default()
    }
}

/// Gunzips and decodes a profile.
#[cfg(test)]
pub(super) fn decode(gz: &[u8]) -> Profile {
    use prost::Message;
    use std::io::Read;
    let mut bytes = Vec::new();
    let mut d = flate2::read::GzDecoder::new(gz);
    d.read_to_end(&mut bytes).unwrap();
    Profile::decode(bytes.as_slice()).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prof::ProfileSample;

    /// A frame of `function` at `addr`, at line `line` of `src/x.rs`.
    fn frame(addr: usize, function: &str, line: u32) -> Frame {
        let (function, file) = (Some(function.to_string()), Some("src/x.rs".to_string()));
        let line = Some(line);
        Frame {
            addr,
            function,
            file,
            line,
        }
    }

    /// Each sample's locations: address, mapping and lines (function, line).
    type Stack<'a> = Vec<(u64, u64, Vec<(&'a str, i64)>)>;

    /// The stacks of `m`, checking that every id refers to an entry.
    fn stacks(m: &Profile) -> Vec<Stack<'_>> {
        let s = |i: i64| m.string_table[i as usize].as_str();
        let loc = |id| m.location.iter().find(|l| l.id == id).expect("location");
        let fun = |id| m.function.iter().find(|f| f.id == id).expect("function");
        let mapped = |id| id == 0 || m.mapping.iter().any(|x| x.id == id);
        let stack = |x: &Sample| -> Stack<'_> {
            (x.location_id.iter().map(|&id| loc(id)))
                .inspect(|l| assert!(mapped(l.mapping_id)))
                .map(|l| {
                    let line = l.line.iter().map(|n| (s(fun(n.function_id).name), n.line));
                    (l.address, l.mapping_id, line.collect())
                })
                .collect()
        };
        m.sample.iter().map(stack).collect()
    }

    #[test]
    fn encodes_as_go_does() {
        let sample = |frames, v: [u64; 4]| ProfileSample {
            frames,
            alloc_objects: v[0],
            alloc_bytes: v[1],
            inuse_objects: v[2],
            inuse_bytes: v[3],
        };
        let main = frame(0x2000, "my::main", 7);
        // An address of two frames, `helper` inlined into `build`; one that did not resolve.
        let inlined = vec![
            frame(0x1000, "my::helper", 10),
            frame(0x1000, "my::build", 7),
        ];
        let unresolved = Frame {
            addr: 0x9000,
            ..Frame::default()
        };
        let p = Heap {
            rate: 4096,
            start_nanos: 1_000,
            time_nanos: 5_000,
            samples: vec![
                sample([inlined, vec![main.clone()]].concat(), [1, 2, 3, 4]),
                sample(vec![unresolved, main], [5, 6, 7, 8]),
                sample(Vec::new(), [9, 10, 0, 0]),
            ],
        };
        let maps = "00001000-00003000 r-xp 00002000 08:01 42        /opt/my prog\n\
                    00003000-00004000 rw-p 00000000 08:01 42        /opt/my prog\n\
                    7ffc0000-7ffc2000 r-xp 00000000 00:00 0         [vdso]\n";
        let regions = parse_maps(maps);
        let path = "/opt/my prog".to_string();
        let (start, end, offset) = (0x1000, 0x3000, 0x2000);
        assert_eq!(
            regions,
            [Region {
                start,
                end,
                offset,
                path
            }]
        );
        let m = encode(&p, &regions);
        let s = |i: i64| m.string_table[i as usize].as_str();
        assert_eq!(m.string_table[0], "");
        let types: Vec<_> = m
            .sample_type
            .iter()
            .map(|t| (s(t.r#type), s(t.unit)))
            .collect();
        let go = [
            ("alloc_objects", "count"),
            ("alloc_space", "bytes"),
            ("inuse_objects", "count"),
            ("inuse_space", "bytes"),
        ];
        assert_eq!(types, go);
        assert_eq!(s(m.default_sample_type), "inuse_space");
        let period = m.period_type.as_ref().unwrap();
        assert_eq!((s(period.r#type), s(period.unit)), ("space", "bytes"));
        assert_eq!(
            (m.period, m.time_nanos, m.duration_nanos),
            (4096, 5_000, 4_000)
        );
        let values: Vec<_> = m.sample.iter().map(|x| x.value.clone()).collect();
        assert_eq!(values, [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 0, 0]]);
        // Locations and functions written once each, the inlined frames innermost first.
        let main = (0x2000, 1, vec![("my::main", 7)]);
        let inlined = (0x1000, 1, vec![("my::helper", 10), ("my::build", 7)]);
        let unresolved = (0x9000, 0, vec![]);
        let expected = [vec![inlined, main.clone()], vec![unresolved, main], vec![]];
        assert_eq!(stacks(&m), expected);
        assert_eq!((m.location.len(), m.function.len()), (3, 3));
        assert!(m.function.iter().all(|f| s(f.filename) == "src/x.rs"));
        let x = &m.mapping[0];
        let (id, limit) = (x.id, x.memory_limit);
        assert_eq!(
            (m.mapping.len(), id, x.memory_start, limit),
            (1, 1, start, end)
        );
        let file = (x.file_offset, s(x.filename), x.build_id);
        assert_eq!(file, (offset, "/opt/my prog", 0));
        assert!(x.has_functions && x.has_filenames && x.has_line_numbers && x.has_inline_frames);
        // Gzipped, with the process's own mappings.
        let d = decode(&p.to_pprof());
        assert_eq!((d.sample, d.location.len()), (m.sample, 3));
        assert!(!d.mapping.is_empty());
    }

    #[test]
    fn finds_the_build_id() {
        // Two notes, 4-byte aligned: a `GNU` ABI tag (type 1), then the build id (type 3).
        let mut notes = Vec::new();
        for (ty, desc) in [
            (1u32, &[0u8, 0, 0, 0, 3, 0, 0, 0][..]),
            (3, &[0xab, 0x01, 0xff]),
        ] {
            for v in [4, desc.len() as u32, ty] {
                notes.extend(v.to_le_bytes());
            }
            notes.extend(b"GNU\0");
            notes.extend(desc);
            notes.resize(notes.len().next_multiple_of(4), 0);
        }
        assert_eq!(gnu_build_id(&notes, 4).as_deref(), Some("ab01ff"));
        assert_eq!(gnu_build_id(&notes[..20], 4), None);
        assert_eq!(build_id("/nonexistent/file"), None);
    }
}
