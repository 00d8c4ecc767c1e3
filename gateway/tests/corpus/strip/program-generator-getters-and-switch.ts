// expect: strips
function* gen(): Generator<number, void, unknown> { let i = 0; while (i < 3) yield i++; }
const doubled = [...gen()].map((x) => x * 2);
const obj = { doubled, get last() { return doubled.at(-1); }, ["computed" + 1]: true };
const text = JSON.stringify(obj, null, 2);
console.log(text);
switch (doubled.length) { case 3: break; default: throw new Error("unexpected"); }
return obj;
