//! A finalizer that keeps results within `[gateway] max_result_bytes`: content past the
//! budget is cut, and a marker says how much was left out.

use rmcp::model::ContentBlock;

use crate::pipeline::Finalize;

pub struct MaxResultBytes {
    max: usize,
}

impl MaxResultBytes {
    pub fn new(max: usize) -> Self {
        Self { max }
    }
}

/// Bytes a content block takes in the result (text or base64 payload).
fn size(block: &ContentBlock) -> usize {
    match block {
        ContentBlock::Text(text) => text.text.len(),
        ContentBlock::Image(image) => image.data.len(),
        ContentBlock::Audio(audio) => audio.data.len(),
        other => serde_json::to_string(other).map_or(0, |s| s.len()),
    }
}

impl Finalize for MaxResultBytes {
    fn finalize(&self, content: &mut Vec<ContentBlock>) {
        let total: usize = content.iter().map(size).sum();
        if total <= self.max {
            return;
        }
        let mut budget = self.max;
        let mut kept = Vec::with_capacity(content.len() + 1);
        for mut block in content.drain(..) {
            let block_size = size(&block);
            if block_size <= budget {
                budget -= block_size;
                kept.push(block);
                continue;
            }
            if let ContentBlock::Text(text) = &mut block
                && budget > 0
            {
                let mut cut = budget;
                while !text.text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text.text.truncate(cut);
                kept.push(block);
            }
            budget = 0;
        }
        let shown: usize = kept.iter().map(size).sum();
        kept.push(ContentBlock::text(format!(
            "[mcp-gateway: result cut to {shown} of {total} bytes (max_result_bytes = {})]",
            self.max
        )));
        *content = kept;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_with_a_marker() {
        let mut content = vec![ContentBlock::text("é".repeat(100))];
        MaxResultBytes::new(51).finalize(&mut content);
        assert_eq!(content.len(), 2);
        assert_eq!(content[0].as_text().unwrap().text.len(), 50);
        assert!(
            content[1]
                .as_text()
                .unwrap()
                .text
                .contains("50 of 200 bytes")
        );
        let mut small = vec![ContentBlock::text("ok")];
        MaxResultBytes::new(51).finalize(&mut small);
        assert_eq!(small.len(), 1);
    }
}
