// expect: strips
const sum: string = await tools.everything["get-sum"]({ a: 1, b: 2 });
return Number(sum) * 2;
