// expect: strips
const items = await callTool("mcp__memory__read_graph", {});
for (const item of items.content) {
  if (item.type === "text") console.log(item.text.slice(0, 80));
}
const big = 0x1f + 0o17 + 0b101 + 1e3 + .5;
const u = "\u{1F980} é \t \\ \" ' `";
/* a block comment */ // a line comment
return { big, u, nothing: void 0, maybe: null ?? undefined, typeofs: typeof big };
