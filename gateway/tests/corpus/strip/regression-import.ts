// expect: refused 3:1: `import` declarations
const a = 1;
import { readFileSync } from "fs";
return readFileSync("/etc/passwd", "utf8");
