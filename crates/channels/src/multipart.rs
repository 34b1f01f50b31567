//! `multipart/form-data` bodies (RFC 7578) for the platforms' upload calls.
//! Written out here rather than with reqwest's `multipart` feature, which
//! would pull MIME guessing and streaming machinery into the binary for a
//! few fields and a file held in memory.

use rand::Rng as _;

/// A form being written.
pub struct Form {
    boundary: String,
    body: Vec<u8>,
}

impl Default for Form {
    fn default() -> Self {
        Self::new()
    }
}

impl Form {
    pub fn new() -> Self {
        Self {
            boundary: format!("herald-{:032x}", rand::thread_rng().r#gen::<u128>()),
            body: Vec::new(),
        }
    }

    /// A text field.
    pub fn text(mut self, name: &str, value: &str) -> Self {
        self.body.extend_from_slice(
            format!(
                "--{}\r\nContent-Disposition: form-data; name=\"{}\"\r\n\r\n",
                self.boundary,
                field_value(name)
            )
            .as_bytes(),
        );
        self.body.extend_from_slice(value.as_bytes());
        self.body.extend_from_slice(b"\r\n");
        self
    }

    /// A file field.
    pub fn file(mut self, name: &str, file_name: &str, content_type: &str, bytes: &[u8]) -> Self {
        self.body.extend_from_slice(
            format!(
                "--{}\r\nContent-Disposition: form-data; name=\"{}\"; filename=\"{}\"\r\nContent-Type: {}\r\n\r\n",
                self.boundary,
                field_value(name),
                field_value(file_name),
                field_value(content_type)
            )
            .as_bytes(),
        );
        self.body.extend_from_slice(bytes);
        self.body.extend_from_slice(b"\r\n");
        self
    }

    /// The `Content-Type` header of the body.
    pub fn content_type(&self) -> String {
        format!("multipart/form-data; boundary={}", self.boundary)
    }

    /// The finished body.
    pub fn finish(mut self) -> Vec<u8> {
        self.body
            .extend_from_slice(format!("--{}--\r\n", self.boundary).as_bytes());
        self.body
    }
}

/// A value fit for a quoted header parameter: quotes and backslashes
/// percent-encoded (as browsers do), line breaks and controls dropped.
fn field_value(value: &str) -> String {
    value
        .chars()
        .filter(|c| !c.is_control())
        .map(|c| match c {
            '"' => "%22".to_owned(),
            '\\' => "%5C".to_owned(),
            c => c.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_break_out_of_their_header() {
        let form = Form::new().file("document", "a\"b\r\nX-Evil: 1.txt", "text/plain", b"hi");
        let boundary = form.boundary.clone();
        let body = String::from_utf8(form.finish()).unwrap();
        assert_eq!(
            body,
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"document\"; filename=\"a%22bX-Evil: 1.txt\"\r\n\
                 Content-Type: text/plain\r\n\r\nhi\r\n--{boundary}--\r\n"
            )
        );
    }
}
