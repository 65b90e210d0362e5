//! Path syntax (§5.13) and the parent/name arithmetic every operation needs.

/// The parent of an absolute path ("/" for top-level nodes), or `None` for a string without '/'.
/// Mirrors ZooKeeper's `lastIndexOf('/')` split, so it accepts paths that later fail validation.
pub fn parent_of(path: &str) -> Option<&str> {
    let slash = path.rfind('/')?;
    Some(if slash == 0 { "/" } else { &path[..slash] })
}

/// The last segment of an absolute path.
pub fn name_of(path: &str) -> &str {
    path.rfind('/').map_or(path, |slash| &path[slash + 1..])
}

/// Joins a parent path and a child name.
pub fn child_path(parent: &str, name: &str) -> String {
    let mut path = String::with_capacity(parent.len() + 1 + name.len());
    path.push_str(parent);
    if parent != "/" {
        path.push('/');
    }
    path.push_str(name);
    path
}

/// The strict ancestors of `path`, nearest first, ending with "/".
pub fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    std::iter::successors(parent_of(path).filter(|_| path != "/"), |p| {
        parent_of(p).filter(|_| *p != "/")
    })
}

/// ZooKeeper's server-side path validation. Characters are judged as Java judges its UTF-16 code
/// units, so anything outside the Basic Multilingual Plane (a surrogate pair in Java) is refused.
pub fn is_valid(path: &str) -> bool {
    if !path.starts_with('/') {
        return false;
    }
    if path == "/" {
        return true;
    }
    !path.ends_with('/') && path[1..].split('/').all(is_valid_segment)
}

fn is_valid_segment(segment: &str) -> bool {
    !segment.is_empty() && segment != "." && segment != ".." && segment.chars().all(is_allowed_char)
}

fn is_allowed_char(c: char) -> bool {
    !matches!(c as u32, 0x0000..=0x001F | 0x007F..=0x009F | 0xD800..=0xF8FF | 0xFFF0..=0xFFFF | 0x10000..)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_follows_java_rules() {
        for good in [
            "/",
            "/a",
            "/a/b",
            "/a.b",
            "/...",
            "/a/.b",
            "/é",
            "/\u{FFEF}",
        ] {
            assert!(is_valid(good), "{good:?}");
        }
        for bad in [
            "",
            "a",
            "/a/",
            "//",
            "/a//b",
            "/.",
            "/a/..",
            "/a\0",
            "/\u{1}",
            "/\u{7f}",
            "/\u{9f}",
            "/\u{E000}",
            "/\u{FFF0}",
            "/😀",
        ] {
            assert!(!is_valid(bad), "{bad:?}");
        }
    }

    #[test]
    fn parents_names_and_ancestors() {
        assert_eq!(parent_of("/a"), Some("/"));
        assert_eq!(parent_of("/a/b"), Some("/a"));
        assert_eq!(parent_of("a"), None);
        assert_eq!(parent_of("/a/"), Some("/a"));
        assert_eq!(name_of("/a/b"), "b");
        assert_eq!(child_path("/", "a"), "/a");
        assert_eq!(child_path("/a", "b"), "/a/b");
        assert_eq!(ancestors("/a/b/c").collect::<Vec<_>>(), ["/a/b", "/a", "/"]);
        assert_eq!(ancestors("/").count(), 0);
    }
}
