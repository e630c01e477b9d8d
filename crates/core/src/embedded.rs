//! Rights an image file carries in itself: its XMP packet (IPTC core and PLUS: `dc:creator`,
//! `dc:rights`, `xmpRights:WebStatement`, `plus:DataMining`) and whether it holds a C2PA
//! manifest (content credentials). Read from the first bytes of the file only (the head the
//! downloader keeps, [`MAX_SCANNED`] at most), with no image decoding: XMP sits near the start
//! of JPEG, PNG and WebP files. Pure; malformed or oversized packets are passed over.

use crate::extract::rights::{Rights, Sourced};

/// The most bytes of a file looked at.
pub const MAX_SCANNED: usize = 256 * 1024;
/// The longest XMP packet read, in bytes.
const MAX_PACKET: usize = 128 * 1024;
/// The longest value kept, in characters.
const MAX_VALUE_CHARS: usize = 1000;

/// `plus:DataMining` values that prohibit mining the image (PLUS LDF vocabulary), as the part
/// after the vocabulary's URL.
const PROHIBITED: [&str; 4] = [
    "DMI-PROHIBITED",
    "DMI-PROHIBITED-AIMLTRAINING",
    "DMI-PROHIBITED-GENAIMLTRAINING",
    "DMI-PROHIBITED-EXCEPTSEARCHENGINEINDEXING",
];

/// What the head of an image file says of its rights.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Embedded {
    /// `creator`, `copyright_notice`, `web_statement`, `data_mining` from its XMP (`from`:
    /// `xmp`), and `c2pa` (`present`, from `file`) when it holds a C2PA manifest.
    pub rights: Rights,
    /// The `plus:DataMining` value when it prohibits mining.
    pub prohibits_mining: Option<String>,
}

/// Reads `head`, the first bytes of an image file.
pub fn read(head: &[u8]) -> Embedded {
    let head = &head[..head.len().min(MAX_SCANNED)];
    let mut embedded = Embedded::default();
    if let Some(packet) = xmp_packet(head) {
        let fields = [
            ("creator", list_value(packet, "dc:creator")),
            ("copyright_notice", list_value(packet, "dc:rights")),
            ("web_statement", property(packet, "xmpRights:WebStatement")),
            ("data_mining", property(packet, "plus:DataMining")),
        ];
        for (field, value) in fields {
            if let Some(value) = value {
                embedded.rights.insert(
                    field.to_owned(),
                    Sourced {
                        value,
                        from: "xmp".to_owned(),
                    },
                );
            }
        }
        embedded.prohibits_mining = embedded
            .rights
            .get("data_mining")
            .map(|s| s.value.clone())
            .filter(|v| {
                let code = v.rsplit('/').next().unwrap_or(v);
                PROHIBITED.iter().any(|p| p.eq_ignore_ascii_case(code))
            });
    }
    if has_c2pa(head) {
        embedded.rights.insert(
            "c2pa".to_owned(),
            Sourced {
                value: "present".to_owned(),
                from: "file".to_owned(),
            },
        );
    }
    embedded
}

/// The XMP packet in `head`: from `<x:xmpmeta` to its end (or `<?xpacket end`), at most
/// [`MAX_PACKET`] bytes, as text.
fn xmp_packet(head: &[u8]) -> Option<&str> {
    let start = find(head, b"<x:xmpmeta")?;
    let rest = &head[start..head.len().min(start + MAX_PACKET)];
    let end = find(rest, b"</x:xmpmeta>").map(|e| e + b"</x:xmpmeta>".len())?;
    std::str::from_utf8(&rest[..end]).ok()
}

/// Whether `head` holds a C2PA manifest store: a JUMBF box labelled `c2pa` (in a JPEG APP11
/// segment, a PNG `caBX` chunk, a WebP/RIFF `C2PA` chunk).
fn has_c2pa(head: &[u8]) -> bool {
    find(head, b"jumb").is_some_and(|at| find(&head[at..], b"c2pa").is_some())
        || find(head, b"caBX").is_some()
}

/// A simple property: `name="value"` (an attribute) or `<name>value</name>`.
fn property(packet: &str, name: &str) -> Option<String> {
    let attribute = format!("{name}=\"");
    if let Some(at) = packet.find(&attribute) {
        let value = &packet[at + attribute.len()..];
        return value.split('"').next().and_then(text);
    }
    let (open, close) = (format!("<{name}>"), format!("</{name}>"));
    let at = packet.find(&open)? + open.len();
    let end = packet[at..].find(&close)?;
    text(&packet[at..at + end])
}

/// A list property (`rdf:Seq`, `rdf:Bag`, `rdf:Alt` of `rdf:li`): its items joined by `; `;
/// else the property as a simple one.
fn list_value(packet: &str, name: &str) -> Option<String> {
    let (open, close) = (format!("<{name}>"), format!("</{name}>"));
    let Some(at) = packet.find(&open).map(|a| a + open.len()) else {
        return property(packet, name);
    };
    let body = &packet[at..at + packet[at..].find(&close)?];
    let items: Vec<String> = body
        .split("<rdf:li")
        .skip(1)
        .filter_map(|item| {
            let value = item.split_once('>')?.1;
            text(value.split("</rdf:li>").next()?)
        })
        .take(16)
        .collect();
    match items.is_empty() {
        true => text(body),
        false => Some(items.join("; ")),
    }
}

/// XML text as a value: entities for `&`, `<`, `>`, quotes decoded, whitespace collapsed, cut
/// to [`MAX_VALUE_CHARS`]; `None` when empty or when it is markup.
fn text(raw: &str) -> Option<String> {
    if raw.contains('<') {
        return None;
    }
    let decoded = raw
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&");
    let value: String = decoded
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(MAX_VALUE_CHARS)
        .collect();
    (!value.is_empty()).then_some(value)
}

/// Where `needle` first is in `haystack`: every download scans its head, so a fast search.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A JPEG head with `xmp` in an APP1 segment (and a C2PA APP11 segment when `c2pa`).
    fn jpeg(xmp: &str, c2pa: bool) -> Vec<u8> {
        let mut bytes = vec![0xff, 0xd8];
        let mut segment = b"http://ns.adobe.com/xap/1.0/\0".to_vec();
        segment.extend_from_slice(xmp.as_bytes());
        bytes.extend_from_slice(&[0xff, 0xe1]);
        bytes.extend_from_slice(&((segment.len() + 2) as u16).to_be_bytes());
        bytes.extend_from_slice(&segment);
        if c2pa {
            let jumbf = b"JP\0\0\0\0\0\x01\0\0\0\x20jumb\0\0\0\x18jumdc2pa\0\x11\0\x10";
            bytes.extend_from_slice(&[0xff, 0xeb]);
            bytes.extend_from_slice(&((jumbf.len() + 2) as u16).to_be_bytes());
            bytes.extend_from_slice(jumbf);
        }
        bytes.extend_from_slice(&[0xff, 0xd9]);
        bytes
    }

    fn xmp(body: &str) -> String {
        format!(
            r#"<?xpacket begin="" id="W5M0MpCehiHzreSzNTczkc9d"?><x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description rdf:about="" {body}</rdf:Description></rdf:RDF></x:xmpmeta><?xpacket end="w"?>"#
        )
    }

    fn values(e: &Embedded) -> Vec<(&str, &str, &str)> {
        e.rights
            .iter()
            .map(|(k, s)| (k.as_str(), s.value.as_str(), s.from.as_str()))
            .collect()
    }

    #[test]
    fn xmp_rights_and_a_c2pa_manifest_are_read_from_the_head_of_the_file() {
        let packet = xmp(
            r#"xmpRights:WebStatement="https://a.test/licence" plus:DataMining="http://ns.useplus.org/ldf/vocab/DMI-PROHIBITED-AIMLTRAINING"><dc:creator><rdf:Seq><rdf:li>Ann &amp; Bo</rdf:li><rdf:li>Cy</rdf:li></rdf:Seq></dc:creator><dc:rights><rdf:Alt><rdf:li xml:lang="x-default">© 2026 Ann</rdf:li></rdf:Alt></dc:rights>"#,
        );
        let read = read(&jpeg(&packet, true));
        assert_eq!(
            values(&read),
            [
                ("c2pa", "present", "file"),
                ("copyright_notice", "© 2026 Ann", "xmp"),
                ("creator", "Ann & Bo; Cy", "xmp"),
                (
                    "data_mining",
                    "http://ns.useplus.org/ldf/vocab/DMI-PROHIBITED-AIMLTRAINING",
                    "xmp"
                ),
                ("web_statement", "https://a.test/licence", "xmp"),
            ]
        );
        assert!(read.prohibits_mining.is_some());
    }

    #[test]
    fn allowed_mining_no_metadata_and_broken_packets_prohibit_nothing() {
        let allowed = xmp(
            r#"><plus:DataMining>http://ns.useplus.org/ldf/vocab/DMI-ALLOWED</plus:DataMining>"#,
        );
        let read_allowed = read(&jpeg(&allowed, false));
        assert_eq!(read_allowed.prohibits_mining, None);
        assert_eq!(read_allowed.rights.len(), 1);
        assert_eq!(read(&[0xff, 0xd8, 0xff, 0xd9]), Embedded::default());
        // Cut short, not UTF-8, oversized: passed over, no panic.
        let cut = jpeg(&allowed, false);
        assert_eq!(read(&cut[..cut.len() / 2]), Embedded::default());
        let mut bad = jpeg(&xmp(r#">"#), false);
        let at = find(&bad, b"rdf:about").unwrap();
        bad[at] = 0xff;
        assert_eq!(read(&bad).rights.len(), 0);
        let huge = xmp(&format!(r#"x="{}">"#, "y".repeat(MAX_PACKET)));
        assert_eq!(read(&jpeg(&huge, false)), Embedded::default());
    }
}
