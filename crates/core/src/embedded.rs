//! Rights an image file carries in itself: its XMP packet (IPTC core and PLUS: `dc:creator`,
//! `dc:rights`, `xmpRights:WebStatement`, `plus:DataMining`), the older IPTC IIM record of a
//! JPEG's Photoshop segment (By-line, Credit, Copyright Notice; XMP wins where both say) and
//! whether it holds a C2PA manifest (content credentials). Read from the first bytes of the file only (the head the
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
    let head = metadata_of(&head[..head.len().min(MAX_SCANNED)]);
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
    for (field, value) in iim_fields(head) {
        embedded.rights.entry(field.to_owned()).or_insert(Sourced {
            value,
            from: "iptc".to_owned(),
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

/// The part of `head` that can hold metadata: a JPEG's segments before its image data (the
/// start of scan, or the end of the image), where XMP, IIM and C2PA segments must come; the
/// whole head of any other file, or of a JPEG whose segments cannot be followed.
fn metadata_of(head: &[u8]) -> &[u8] {
    if !head.starts_with(&[0xff, 0xd8]) {
        return head;
    }
    let mut at = 2;
    loop {
        // Markers may be preceded by fill bytes (0xFF).
        while head.get(at) == Some(&0xff) && head.get(at + 1) == Some(&0xff) {
            at += 1;
        }
        let (Some(0xff), Some(&marker)) = (head.get(at), head.get(at + 1)) else {
            return head;
        };
        match marker {
            // Start of scan, end of image: no metadata segment after them.
            0xda | 0xd9 => return &head[..at],
            // Markers without a length.
            0x01 | 0xd0..=0xd7 => at += 2,
            _ => {
                let Some(length) = head.get(at + 2..at + 4) else {
                    return head;
                };
                at += 2 + usize::from(u16::from_be_bytes([length[0], length[1]]));
            }
        }
    }
}

/// The XMP packet in `head`: from `<x:xmpmeta` to its end (or `<?xpacket end`), at most
/// [`MAX_PACKET`] bytes, as text.
fn xmp_packet(head: &[u8]) -> Option<&str> {
    let start = find(head, b"<x:xmpmeta")?;
    let rest = &head[start..head.len().min(start + MAX_PACKET)];
    let end = find(rest, b"</x:xmpmeta>").map(|e| e + b"</x:xmpmeta>".len())?;
    std::str::from_utf8(&rest[..end]).ok()
}

/// The IPTC IIM datasets (record 2) a JPEG's APP13 `Photoshop 3.0` segment carries in its
/// `8BIM` resource 0x0404: `creator` (2:80 By-line, repeatable), `credit_text` (2:110 Credit),
/// `copyright_notice` (2:116). Cut short or malformed resources end the reading, no more.
fn iim_fields(head: &[u8]) -> Vec<(&'static str, String)> {
    let Some(iim) = find(head, b"Photoshop 3.0\0").and_then(|at| iim_block(&head[at + 14..]))
    else {
        return Vec::new();
    };
    let mut creators = Vec::new();
    let (mut credit, mut notice) = (None, None);
    let mut rest = iim;
    while let [0x1c, record, dataset, high, low, tail @ ..] = rest {
        // An extended length (its top bit set) is not used by the datasets read here.
        if high & 0x80 != 0 {
            break;
        }
        let length = usize::from(u16::from_be_bytes([*high, *low]));
        let Some(data) = tail.get(..length) else {
            break;
        };
        rest = &tail[length..];
        if *record != 2 {
            continue;
        }
        let value = || text(&latin1_or_utf8(data));
        match dataset {
            80 if creators.len() < 16 => creators.extend(value()),
            110 => credit = credit.or_else(value),
            116 => notice = notice.or_else(value),
            _ => {}
        }
    }
    let creator = (!creators.is_empty()).then(|| creators.join("; "));
    [
        ("creator", creator),
        ("credit_text", credit),
        ("copyright_notice", notice),
    ]
    .into_iter()
    .filter_map(|(field, value)| Some((field, value?)))
    .collect()
}

/// The data of the `8BIM` resource 0x0404 (IPTC-NAA) among the resources in `resources`.
fn iim_block(mut resources: &[u8]) -> Option<&[u8]> {
    loop {
        let [
            b'8',
            b'B',
            b'I',
            b'M',
            id_high,
            id_low,
            name_length,
            rest @ ..,
        ] = resources
        else {
            return None;
        };
        // The name: a Pascal string padded to an even length, its length byte included.
        let name = usize::from(*name_length) + 1;
        let skip = name + name % 2 - 1;
        let rest = rest.get(skip..)?;
        let size = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?);
        let size = usize::try_from(size).ok()?;
        let data = rest.get(4..4 + size)?;
        if [*id_high, *id_low] == [0x04, 0x04] {
            return Some(data);
        }
        resources = rest.get(4 + size + size % 2..)?;
    }
}

/// IIM text: UTF-8 when it is, else Latin-1 (the older files' usual character set).
fn latin1_or_utf8(data: &[u8]) -> String {
    match std::str::from_utf8(data) {
        Ok(text) => text.to_owned(),
        Err(_) => data.iter().map(|b| char::from(*b)).collect(),
    }
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
    fn a_jpeg_is_searched_for_metadata_up_to_its_image_data_only() {
        let packet = xmp(r#"xmpRights:WebStatement="https://a.test/licence">"#);
        let mut file = jpeg(&packet, false);
        // Its image data: the scan's header, then bytes that happen to spell an XMP packet
        // and a Photoshop segment's name.
        file.truncate(file.len() - 2);
        let data_at = file.len();
        file.extend_from_slice(&[0xff, 0xda, 0x00, 0x08, 1, 1, 0, 0, 0x3f, 0]);
        let lookalike = xmp(r#"xmpRights:WebStatement="https://b.test/not-this">"#);
        file.extend_from_slice(lookalike.as_bytes());
        file.extend_from_slice(b"Photoshop 3.0\08BIM caBX");
        file.extend_from_slice(&[0xff, 0xd9]);
        assert_eq!(metadata_of(&file).len(), data_at);
        assert_eq!(
            values(&read(&file)),
            [("web_statement", "https://a.test/licence", "xmp")]
        );
        // Only the look-alike, in the image data: nothing is read.
        let mut bare = vec![0xff, 0xd8, 0xff, 0xda, 0x00, 0x02];
        bare.extend_from_slice(lookalike.as_bytes());
        assert_eq!(read(&bare), Embedded::default());
        // A head that ends before the image data (a large file's first bytes): all of it is
        // searched, as any other file's head.
        let mut cut = jpeg(&packet, false);
        cut.truncate(cut.len() - 2);
        assert_eq!(metadata_of(&cut), &cut[..]);
        assert_eq!(values(&read(&cut)).len(), 1);
        // A segment longer than the head: the same.
        let mut long = vec![0xff, 0xd8, 0xff, 0xe1, 0xff, 0xff];
        long.extend_from_slice(packet.as_bytes());
        assert_eq!(metadata_of(&long), &long[..]);
        assert_eq!(values(&read(&long)).len(), 1);
        let png = b"\x89PNG\r\n\x1a\n<x:xmpmeta".to_vec();
        assert_eq!(metadata_of(&png), &png[..]);
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

    /// A JPEG head with an APP13 Photoshop segment holding IIM `datasets` (after another
    /// resource with an odd-length name).
    fn jpeg_with_iim(datasets: &[(u8, &[u8])], xmp: Option<&str>) -> Vec<u8> {
        let mut iim = Vec::new();
        for (dataset, value) in datasets {
            iim.extend_from_slice(&[0x1c, 2, *dataset]);
            iim.extend_from_slice(&(value.len() as u16).to_be_bytes());
            iim.extend_from_slice(value);
        }
        let mut segment = b"Photoshop 3.0\0".to_vec();
        segment.extend_from_slice(b"8BIM\x04\x0c\x03abc\0\0\0\x01x\0");
        segment.extend_from_slice(b"8BIM\x04\x04\0\0");
        segment.extend_from_slice(&(iim.len() as u32).to_be_bytes());
        segment.extend_from_slice(&iim);
        let mut bytes = match xmp {
            Some(xmp) => jpeg(xmp, false),
            None => vec![0xff, 0xd8, 0xff, 0xd9],
        };
        bytes.truncate(bytes.len() - 2);
        bytes.extend_from_slice(&[0xff, 0xed]);
        bytes.extend_from_slice(&((segment.len() + 2) as u16).to_be_bytes());
        bytes.extend_from_slice(&segment);
        bytes.extend_from_slice(&[0xff, 0xd9]);
        bytes
    }

    #[test]
    fn iptc_iim_rights_are_read_and_xmp_wins_where_both_say() {
        let datasets: &[(u8, &[u8])] = &[
            (5, b"Title"),
            (80, b"Ann"),
            (80, b"Bo \xe9"),
            (110, b"Photo: Cy"),
            (116, "© 2026 Ann".as_bytes()),
        ];
        assert_eq!(
            values(&read(&jpeg_with_iim(datasets, None))),
            [
                ("copyright_notice", "© 2026 Ann", "iptc"),
                ("creator", "Ann; Bo é", "iptc"),
                ("credit_text", "Photo: Cy", "iptc"),
            ]
        );
        let packet = xmp(r#"><dc:creator><rdf:Seq><rdf:li>Dee</rdf:li></rdf:Seq></dc:creator>"#);
        assert_eq!(
            values(&read(&jpeg_with_iim(datasets, Some(&packet)))),
            [
                ("copyright_notice", "© 2026 Ann", "iptc"),
                ("creator", "Dee", "xmp"),
                ("credit_text", "Photo: Cy", "iptc"),
            ]
        );
        // Cut short anywhere: what was whole is kept, no panic.
        let whole = jpeg_with_iim(datasets, None);
        for end in 0..whole.len() {
            let _ = read(&whole[..end]);
        }
        let mut lying = whole.clone();
        let at = find(&lying, b"8BIM\x04\x04").unwrap() + 8;
        lying[at..at + 4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(read(&lying), Embedded::default());
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
