//! A finalizer that keeps results within `[gateway] max_result_bytes`: content past the
//! budget is cut, and a marker says how much was left out. A block of a type the gateway
//! does not know weighs its JSON, and is kept whole or left out, never cut.

use crate::pipeline::Finalize;
use crate::tool_result::Block;

pub struct MaxResultBytes {
    max: usize,
}

impl MaxResultBytes {
    pub fn new(max: usize) -> Self {
        Self { max }
    }
}

impl Finalize for MaxResultBytes {
    fn finalize(&self, content: &mut Vec<Block>) {
        let total: usize = content.iter().map(Block::size).sum();
        if total <= self.max {
            return;
        }
        let mut budget = self.max;
        let mut kept = Vec::with_capacity(content.len() + 1);
        for mut block in content.drain(..) {
            let block_size = block.size();
            if block_size <= budget {
                budget -= block_size;
                kept.push(block);
                continue;
            }
            if let Some(text) = block.text_mut()
                && budget > 0
            {
                let mut cut = budget;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text.truncate(cut);
                kept.push(block);
            }
            budget = 0;
        }
        let shown: usize = kept.iter().map(Block::size).sum();
        kept.push(Block::text(format!(
            "[mcp-gateway: result cut to {shown} of {total} bytes (max_result_bytes = {})]",
            self.max
        )));
        *content = kept;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn long_text_is_cut_with_a_marker() {
        let mut content = vec![Block::text("é".repeat(100))];
        MaxResultBytes::new(51).finalize(&mut content);
        assert_eq!(content.len(), 2);
        assert_eq!(content[0].as_text().unwrap().len(), 50);
        assert!(content[1].as_text().unwrap().contains("50 of 200 bytes"));
        let mut small = vec![Block::text("ok")];
        MaxResultBytes::new(51).finalize(&mut small);
        assert_eq!(small.len(), 1);
    }

    #[test]
    fn a_block_of_an_unknown_type_is_kept_whole_or_left_out() {
        let hologram = json!({"type": "hologram", "data": "x".repeat(40)});
        let hologram = Block::from_json(hologram).unwrap();
        let weight = hologram.size();
        let mut fits = vec![hologram.clone(), Block::text("tail")];
        MaxResultBytes::new(weight + 2).finalize(&mut fits);
        assert_eq!(fits[0], hologram);
        assert_eq!(fits[1].as_text(), Some("ta"));

        let mut too_big = vec![Block::text("head"), hologram];
        MaxResultBytes::new(weight).finalize(&mut too_big);
        assert_eq!(too_big.len(), 2);
        assert_eq!(too_big[0].as_text(), Some("head"));
        assert!(
            too_big[1]
                .as_text()
                .unwrap()
                .starts_with("[mcp-gateway: result cut")
        );
    }
}
