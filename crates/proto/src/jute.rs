//! The jute binary encoding: big-endian integers, length-prefixed strings, buffers and vectors,
//! with −1 as the null length.

use bytes::Bytes;

use crate::DecodeError;

/// A value with a jute encoding.
pub trait Jute: Sized {
    fn write_to(&self, out: &mut Vec<u8>);
    fn read_from(reader: &mut Reader<'_>) -> Result<Self, DecodeError>;

    fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_to(&mut out);
        out
    }
}

/// Reads jute values from one complete frame. Every length is checked against what is left in
/// the frame before anything is allocated, so a hostile length cannot make us allocate more than
/// the frame we already hold.
pub struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, offset: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.offset
    }

    /// Bytes read so far.
    pub fn consumed(&self) -> usize {
        self.offset
    }

    pub fn take(&mut self, count: usize) -> Result<&'a [u8], DecodeError> {
        if count > self.remaining() {
            return Err(DecodeError::Truncated {
                offset: self.offset,
                wanted: count,
            });
        }
        let slice = &self.bytes[self.offset..self.offset + count];
        self.offset += count;
        Ok(slice)
    }

    fn take_array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        Ok(self.take(N)?.try_into().expect("take returned N bytes"))
    }

    /// A length prefix: `None` for −1 (null), an error for any other negative value or a length
    /// longer than the rest of the frame.
    fn length(&mut self, min_element_bytes: usize) -> Result<Option<usize>, DecodeError> {
        let offset = self.offset;
        let length = i32::read_from(self)?;
        if length == -1 {
            return Ok(None);
        }
        let length =
            usize::try_from(length).map_err(|_| DecodeError::BadLength { offset, length })?;
        if length.saturating_mul(min_element_bytes) > self.remaining() {
            return Err(DecodeError::BadLength {
                offset,
                length: length as i32,
            });
        }
        Ok(Some(length))
    }

    /// Fails unless the whole frame was consumed.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            extra => Err(DecodeError::TrailingBytes { extra }),
        }
    }
}

impl Jute for i32 {
    fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_be_bytes());
    }
    fn read_from(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(i32::from_be_bytes(reader.take_array()?))
    }
}

impl Jute for i64 {
    fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_be_bytes());
    }
    fn read_from(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(i64::from_be_bytes(reader.take_array()?))
    }
}

impl Jute for bool {
    fn write_to(&self, out: &mut Vec<u8>) {
        out.push(u8::from(*self));
    }
    fn read_from(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(reader.take(1)?[0] != 0)
    }
}

/// A nullable buffer: null and empty are different values on the wire and clients see the
/// difference, so both survive a round trip.
impl Jute for Option<Vec<u8>> {
    fn write_to(&self, out: &mut Vec<u8>) {
        write_buffer(self.as_deref(), out);
    }
    fn read_from(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(read_buffer(reader)?.map(<[u8]>::to_vec))
    }
}

/// The same nullable buffer, held where it can be shared without a copy: a server's read
/// replies share the bytes its tree holds until they are encoded.
impl Jute for Option<Bytes> {
    fn write_to(&self, out: &mut Vec<u8>) {
        write_buffer(self.as_deref(), out);
    }
    fn read_from(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(read_buffer(reader)?.map(Bytes::copy_from_slice))
    }
}

/// Writes a nullable buffer (length −1 for null) from wherever its bytes are.
pub fn write_buffer(buffer: Option<&[u8]>, out: &mut Vec<u8>) {
    match buffer {
        None => (-1i32).write_to(out),
        Some(bytes) => {
            (bytes.len() as i32).write_to(out);
            out.extend_from_slice(bytes);
        }
    }
}

fn read_buffer<'a>(reader: &mut Reader<'a>) -> Result<Option<&'a [u8]>, DecodeError> {
    match reader.length(1)? {
        None => Ok(None),
        Some(length) => Ok(Some(reader.take(length)?)),
    }
}

/// A nullable ustring.
impl Jute for Option<String> {
    fn write_to(&self, out: &mut Vec<u8>) {
        match self {
            None => (-1i32).write_to(out),
            Some(text) => {
                (text.len() as i32).write_to(out);
                out.extend_from_slice(text.as_bytes());
            }
        }
    }
    fn read_from(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match reader.length(1)? {
            None => Ok(None),
            Some(length) => {
                let offset = reader.offset;
                let bytes = reader.take(length)?;
                let text =
                    std::str::from_utf8(bytes).map_err(|_| DecodeError::BadUtf8 { offset })?;
                Ok(Some(text.to_owned()))
            }
        }
    }
}

/// A ustring whose null form carries no meaning of its own (paths, schemes): null reads as empty,
/// which every check downstream then treats like any other invalid path.
impl Jute for String {
    fn write_to(&self, out: &mut Vec<u8>) {
        (self.len() as i32).write_to(out);
        out.extend_from_slice(self.as_bytes());
    }
    fn read_from(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Option::<String>::read_from(reader)?.unwrap_or_default())
    }
}

/// A vector whose null form carries no meaning of its own: null reads as empty.
impl<T: Jute> Jute for Vec<T> {
    fn write_to(&self, out: &mut Vec<u8>) {
        (self.len() as i32).write_to(out);
        for item in self {
            item.write_to(out);
        }
    }
    fn read_from(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Option::<Vec<T>>::read_from(reader)?.unwrap_or_default())
    }
}

/// A nullable vector (ACL lists: null is an invalid ACL, empty is a different error path).
impl<T: Jute> Jute for Option<Vec<T>> {
    fn write_to(&self, out: &mut Vec<u8>) {
        match self {
            None => (-1i32).write_to(out),
            Some(items) => items.write_to(out),
        }
    }
    fn read_from(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match reader.length(1)? {
            None => Ok(None),
            Some(count) => (0..count)
                .map(|_| T::read_from(reader))
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
        }
    }
}

/// Declares a jute record: a struct whose encoding is its fields concatenated in order.
#[macro_export]
macro_rules! jute_record {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[$field_meta:meta])* pub $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Default)]
        pub struct $name { $($(#[$field_meta])* pub $field: $ty),* }

        impl $crate::jute::Jute for $name {
            #[allow(unused_variables)]
            fn write_to(&self, out: &mut Vec<u8>) {
                $($crate::jute::Jute::write_to(&self.$field, out);)*
            }
            #[allow(unused_variables)]
            fn read_from(reader: &mut $crate::jute::Reader<'_>) -> Result<Self, $crate::DecodeError> {
                Ok($name { $($field: $crate::jute::Jute::read_from(reader)?),* })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_and_owned_buffers_have_one_wire_form() {
        for buffer in [None, Some(Vec::new()), Some(b"value".to_vec())] {
            let mut owned = Vec::new();
            buffer.write_to(&mut owned);
            let mut shared = Vec::new();
            buffer.clone().map(Bytes::from).write_to(&mut shared);
            assert_eq!(owned, shared);
            let decoded = Option::<Bytes>::read_from(&mut Reader::new(&shared)).expect("decodes");
            assert_eq!(decoded.as_deref(), buffer.as_deref());
        }
    }
}
