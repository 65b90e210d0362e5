//! ACLs as zkCli writes and reads them: `scheme:id:perms[,…]` with perms from `cdrwa`.

use zoolog_client::{perms, Acl, Id};

/// zkCli's permission letters, in the order it prints them.
const PERM_LETTERS: [(char, i32); 5] = [
    ('c', perms::CREATE),
    ('d', perms::DELETE),
    ('r', perms::READ),
    ('w', perms::WRITE),
    ('a', perms::ADMIN),
];

/// The ACL entries of `text`. Like zkCli, a malformed entry or an unknown permission letter is
/// reported and skipped rather than failing the command: the server judges what is left.
pub(crate) fn parse_acl(text: &str) -> (Vec<Acl>, Vec<String>) {
    let mut acl = Vec::new();
    let mut complaints = Vec::new();
    for entry in text.split(',') {
        // The id may itself hold colons (digest user:hash, ip:…), so split at the first and last.
        let (Some(first), Some(last)) = (entry.find(':'), entry.rfind(':')) else {
            complaints.push(format!("{entry} does not have the form scheme:id:perm"));
            continue;
        };
        if first == last {
            complaints.push(format!("{entry} does not have the form scheme:id:perm"));
            continue;
        }
        let perms = parse_perms(&entry[last + 1..], &mut complaints);
        acl.push(Acl {
            perms,
            id: Id::new(&entry[..first], &entry[first + 1..last]),
        });
    }
    (acl, complaints)
}

fn parse_perms(letters: &str, complaints: &mut Vec<String>) -> i32 {
    letters.chars().fold(0, |perms, letter| {
        match PERM_LETTERS.iter().find(|(known, _)| *known == letter) {
            Some((_, bit)) => perms | bit,
            None => {
                complaints.push(format!("Unknown perm type: {letter}"));
                perms
            }
        }
    })
}

/// One ACL entry as getAcl prints it: `'world,'anyone` then `: cdrwa`.
pub(crate) fn acl_entry_text(entry: &Acl) -> String {
    format!(
        "'{},'{}\n: {}",
        entry.id.scheme,
        entry.id.id,
        perm_letters(entry.perms)
    )
}

fn perm_letters(perms: i32) -> String {
    PERM_LETTERS
        .iter()
        .filter(|(_, bit)| perms & bit != 0)
        .map(|(letter, _)| letter)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_entries_whose_ids_hold_colons() {
        let (acl, complaints) = parse_acl("world:anyone:r,digest:bob:c2VjcmV0:cdrwa");
        assert!(complaints.is_empty());
        assert_eq!(acl[0].id, Id::new("world", "anyone"));
        assert_eq!(acl[0].perms, perms::READ);
        assert_eq!(acl[1].id, Id::new("digest", "bob:c2VjcmV0"));
        assert_eq!(acl[1].perms, perms::ALL);
    }

    #[test]
    fn reports_and_skips_what_it_cannot_read() {
        let (acl, complaints) = parse_acl("bad,world:anyone:rx");
        assert_eq!(acl.len(), 1);
        assert_eq!(acl[0].perms, perms::READ);
        assert_eq!(
            complaints,
            [
                "bad does not have the form scheme:id:perm",
                "Unknown perm type: x"
            ]
        );
    }

    #[test]
    fn prints_perms_in_zkclis_order() {
        let entry = Acl {
            perms: perms::ALL,
            id: Id::new("world", "anyone"),
        };
        assert_eq!(acl_entry_text(&entry), "'world,'anyone\n: cdrwa");
        assert_eq!(perm_letters(perms::READ | perms::ADMIN), "ra");
    }
}
