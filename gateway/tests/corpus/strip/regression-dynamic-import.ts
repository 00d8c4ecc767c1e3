// expect: refused 3:32: `import()` is not available
const path = "fs";
const { readFileSync } = await import(path);
return readFileSync("/etc/passwd", "utf8");
