// expect: refused 3:3: `export` declarations
function f() {
  export const a = 1;
}
return f();
