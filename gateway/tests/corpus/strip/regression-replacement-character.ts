// expect: refused 3:11: unexpected U+FFFD
const a = "� in a string is fine";
const b = �;
return a;
