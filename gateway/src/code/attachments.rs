//! Images that tool calls return do not go to the program: a program cannot do anything
//! useful with base64 pixels, and they would count against its output. They are taken out
//! of each sub-call result before the program sees it and attached to the run's outcome.

use serde_json::Value;

/// Remove `type: "image"` items from a `CallToolResult`'s `content`, returning them in
/// their original order. Anything that is not a result with a content array is left as is.
pub(crate) fn take_images(result: &mut Value) -> Vec<Value> {
    let Some(content) = result.get_mut("content").and_then(Value::as_array_mut) else {
        return Vec::new();
    };
    let (images, rest): (Vec<Value>, Vec<Value>) = std::mem::take(content)
        .into_iter()
        .partition(|item| item.get("type").and_then(Value::as_str) == Some("image"));
    *content = rest;
    images
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn images_move_out_and_the_rest_stays_in_order() {
        let mut result = json!({
            "content": [
                {"type": "text", "text": "a"},
                {"type": "image", "data": "AAA", "mimeType": "image/png"},
                {"type": "text", "text": "b"},
                {"type": "image", "data": "BBB", "mimeType": "image/png"}
            ],
            "structuredContent": {"n": 1}
        });
        let images = take_images(&mut result);
        assert_eq!(images.len(), 2);
        assert_eq!(images[0]["data"], "AAA");
        assert_eq!(images[1]["data"], "BBB");
        assert_eq!(
            result,
            json!({
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                "structuredContent": {"n": 1}
            })
        );
    }

    #[test]
    fn results_without_content_are_untouched() {
        let mut result = json!({"structuredContent": {"content": 1}});
        assert!(take_images(&mut result).is_empty());
        assert_eq!(result, json!({"structuredContent": {"content": 1}}));
        let mut odd = json!("text");
        assert!(take_images(&mut odd).is_empty());
    }
}
