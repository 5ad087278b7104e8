// Reads one JSON string per line on stdin and answers, per line, the JSON array of which of its
// lines commonmark.js (the CommonMark reference implementation) puts where vigil's rule 1 masks:
// code blocks, block quotes (with their lazy lines) and HTML blocks of types 1 to 6.
'use strict';
const commonmark = require('commonmark');
const readline = require('readline');

const parser = new commonmark.Parser();

function masked(text) {
  const count = text.split(/\r\n|\n|\r/).length;
  const out = new Array(count).fill(false);
  const walker = parser.parse(text).walker();
  let event;
  while ((event = walker.next())) {
    const node = event.node;
    const hides =
      node.type === 'code_block' ||
      node.type === 'block_quote' ||
      (node.type === 'html_block' && node._htmlBlockType !== 7);
    if (!event.entering || !hides || !node.sourcepos) continue;
    // A container's own position may end before the lazy lines its paragraph holds.
    let last = node.sourcepos[1][0];
    const inner = node.walker();
    let step;
    while ((step = inner.next())) {
      if (step.entering && step.node.sourcepos) last = Math.max(last, step.node.sourcepos[1][0]);
    }
    for (let line = node.sourcepos[0][0]; line <= Math.min(last, count); line++) out[line - 1] = true;
  }
  return out;
}

readline.createInterface({ input: process.stdin }).on('line', (line) => {
  process.stdout.write(JSON.stringify(masked(JSON.parse(line))) + '\n');
});
