// A small Markdown renderer for agent answers. Every piece of source text is HTML-escaped before
// any markup is added, so the result is safe to assign to innerHTML: the only tags produced are
// the ones written here, and link targets are limited to http(s), mailto and in-page anchors.
// Supported: headings, paragraphs, emphasis, strikethrough, inline code, fenced code blocks
// (with light syntax colouring), block quotes, ordered/unordered/task lists, tables, rules,
// links, images and bare URLs. Unfinished constructs (a fence still streaming) render as far
// as they go. An image from another site is shown as a link, never loaded: a prompt-injected
// answer must not send data out just by being displayed (the page's CSP refuses such loads too);
// only inline `data:` images are drawn.

export function escapeHtml(text) {
  return String(text)
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&#39;");
}

function safeUrl(raw, forImage) {
  const url = raw.trim();
  if (/^https?:\/\//i.test(url) || /^mailto:/i.test(url) || url.startsWith("#")) return url;
  if (forImage && /^data:image\/(png|jpe?g|gif|webp);base64,[a-z0-9+/=]+$/i.test(url)) return url;
  return null;
}

// ---------------------------------------------------------------- inline

// `shared`: the stash of the text a link's label comes from, whose code spans were cut out there.
function renderInline(src, shared) {
  // Code spans are cut out first so nothing inside them is interpreted.
  const stash = shared || [];
  const keep = (html) => {
    stash.push(html);
    return `\u0000${stash.length - 1}\u0000`;
  };
  let s = shared ? src : src.replace(/\u0000/g, "");
  s = s.replace(/(`+)([\s\S]*?[^`])\1(?!`)/g, (_, __, code) => keep(`<code>${escapeHtml(code.trim() === "" ? code : code.replace(/^ (.*) $/s, "$1"))}</code>`));
  // Images and links, with their URL checked before escaping the rest.
  s = s.replace(/!\[([^\]]*)\]\(([^()\s]+(?:\([^()\s]*\))?)(?:\s+"[^"]*")?\)/g, (m, alt, url) => {
    const safe = safeUrl(url, true);
    if (!safe) return keep(escapeHtml(m));
    if (!safe.startsWith("data:")) {
      const label = escapeHtml(alt.trim() || safe);
      return keep(`<a class="remote-image" href="${escapeHtml(safe)}" target="_blank" rel="noopener noreferrer" title="Image not loaded">🖼 ${label}</a>`);
    }
    return keep(`<img src="${escapeHtml(safe)}" alt="${escapeHtml(alt)}" loading="lazy">`);
  });
  s = s.replace(/\[([^\]]+)\]\(([^()\s]+(?:\([^()\s]*\))?)(?:\s+"[^"]*")?\)/g, (m, text, url) => {
    const safe = safeUrl(url, false);
    if (!safe) return keep(escapeHtml(m));
    return keep(`<a href="${escapeHtml(safe)}" target="_blank" rel="noopener noreferrer">${renderInline(text, stash)}</a>`);
  });
  s = s.replace(/<(https?:\/\/[^\s<>]+)>/g, (_, url) => keep(link(url)));
  s = s.replace(/(^|[\s(])(https?:\/\/[^\s<>()]*[^\s<>().,;:!?'"])/g, (_, pre, url) => pre + keep(link(url)));
  s = escapeHtml(s);
  s = s.replace(/\*\*(?=\S)([\s\S]*?\S)\*\*/g, "<strong>$1</strong>");
  s = s.replace(/(^|[^\w])__(?=\S)([\s\S]*?\S)__(?!\w)/g, "$1<strong>$2</strong>");
  s = s.replace(/(^|[^*\w])\*(?=[^\s*])([^*]*?[^\s*])\*(?!\*)/g, "$1<em>$2</em>");
  s = s.replace(/(^|[^\w])_(?=[^\s_])([^_]*?[^\s_])_(?!\w)/g, "$1<em>$2</em>");
  s = s.replace(/~~(?=\S)([\s\S]*?\S)~~/g, "<del>$1</del>");
  s = s.replace(/( {2,}|\\)\n/g, "<br>");
  return s.replace(/\u0000(\d+)\u0000/g, (_, i) => stash[Number(i)]);
}

function link(url) {
  const e = escapeHtml(url);
  return `<a href="${e}" target="_blank" rel="noopener noreferrer">${e}</a>`;
}

// ---------------------------------------------------------------- code colouring

const KEYWORDS = new Set(
  (
    "as async await break case catch class const continue def default del do elif else enum export extends " +
    "false fn for from func function go if impl import in interface let loop match mod module mut new nil " +
    "None null package pass pub raise return self Self static struct super switch this throw true True False " +
    "try type typeof use var void where while with yield echo then fi esac done local"
  ).split(" "),
);

/** Colours strings, comments, numbers and keywords; everything else is escaped as is. */
export function highlight(code, lang) {
  const l = (lang || "").toLowerCase();
  if (l === "diff" || l === "patch") {
    return code
      .split("\n")
      .map((line) => {
        const cls = line.startsWith("+") ? "hl-add" : line.startsWith("-") ? "hl-del" : line.startsWith("@@") ? "hl-hunk" : "";
        return cls ? `<span class="${cls}">${escapeHtml(line)}</span>` : escapeHtml(line);
      })
      .join("\n");
  }
  if (!l || l === "text" || l === "txt" || l === "plain" || l === "markdown" || l === "md") return escapeHtml(code);
  const hashComments = ["py", "python", "sh", "bash", "shell", "zsh", "toml", "yaml", "yml", "rb", "ruby", "console"].includes(l);
  const token = hashComments
    ? /(#[^\n]*)|("(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')|(\b\d[\d_.]*\b)|([A-Za-z_][\w]*)/g
    : /(\/\/[^\n]*|\/\*[\s\S]*?\*\/)|("(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|`(?:\\.|[^`\\])*`)|(\b\d[\d_.]*\b)|([A-Za-z_][\w]*)/g;
  let out = "";
  let last = 0;
  for (const m of code.matchAll(token)) {
    out += escapeHtml(code.slice(last, m.index));
    const [text, comment, str, num, word] = m;
    if (comment) out += `<span class="hl-com">${escapeHtml(text)}</span>`;
    else if (str) out += `<span class="hl-str">${escapeHtml(text)}</span>`;
    else if (num) out += `<span class="hl-num">${escapeHtml(text)}</span>`;
    else if (word && KEYWORDS.has(word)) out += `<span class="hl-kw">${escapeHtml(text)}</span>`;
    else out += escapeHtml(text);
    last = m.index + text.length;
  }
  return out + escapeHtml(code.slice(last));
}

// ---------------------------------------------------------------- blocks

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const LIST_ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;
const TABLE_SEP = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

function splitRow(line) {
  let s = line.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
  return s.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, "|"));
}

function startsBlock(line, next) {
  return (
    FENCE.test(line) ||
    HEADING.test(line) ||
    RULE.test(line) ||
    QUOTE.test(line) ||
    LIST_ITEM.test(line) ||
    (line.includes("|") && next !== undefined && TABLE_SEP.test(next) && next.includes("-"))
  );
}

function renderBlocks(lines) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      i++;
      continue;
    }
    let m = FENCE.exec(line);
    if (m) {
      const fence = m[1];
      const lang = m[2] || "";
      const body = [];
      i++;
      while (i < lines.length && !new RegExp(`^ {0,3}${fence[0]}{${fence.length},}\\s*$`).test(lines[i])) body.push(lines[i++]);
      i++; // the closing fence (or past the end while it still streams)
      const label = lang ? `<span class="code-lang">${escapeHtml(lang)}</span>` : "";
      out.push(`<div class="code-block">${label}<button class="copy-code" type="button" title="Copy">Copy</button><pre><code>${highlight(body.join("\n"), lang)}</code></pre></div>`);
      continue;
    }
    m = HEADING.exec(line);
    if (m) {
      const level = m[1].length;
      out.push(`<h${level}>${renderInline(m[2])}</h${level}>`);
      i++;
      continue;
    }
    if (RULE.test(line)) {
      out.push("<hr>");
      i++;
      continue;
    }
    if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && lines[i].trim() && (QUOTE.test(lines[i]) || body.length)) {
        const q = QUOTE.exec(lines[i]);
        body.push(q ? q[1] : lines[i]);
        i++;
      }
      out.push(`<blockquote>${renderBlocks(body)}</blockquote>`);
      continue;
    }
    if (line.includes("|") && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1]) && lines[i + 1].includes("-")) {
      const head = splitRow(line);
      const aligns = splitRow(lines[i + 1]).map((c) => (c.startsWith(":") && c.endsWith(":") ? "center" : c.endsWith(":") ? "right" : c.startsWith(":") ? "left" : ""));
      i += 2;
      const rows = [];
      while (i < lines.length && lines[i].trim() && lines[i].includes("|")) rows.push(splitRow(lines[i++]));
      const cell = (tag, c, k) => `<${tag}${aligns[k] ? ` style="text-align:${aligns[k]}"` : ""}>${renderInline(c)}</${tag}>`;
      out.push(
        `<div class="table-wrap"><table><thead><tr>${head.map((c, k) => cell("th", c, k)).join("")}</tr></thead><tbody>` +
          rows.map((r) => `<tr>${head.map((_, k) => cell("td", r[k] || "", k)).join("")}</tr>`).join("") +
          "</tbody></table></div>",
      );
      continue;
    }
    m = LIST_ITEM.exec(line);
    if (m) {
      i = renderList(lines, i, out);
      continue;
    }
    const para = [];
    while (i < lines.length && lines[i].trim() && !(para.length && startsBlock(lines[i], lines[i + 1]))) para.push(lines[i++]);
    out.push(`<p>${renderInline(para.join("\n"))}</p>`);
  }
  return out.join("");
}

function renderList(lines, start, out) {
  const first = LIST_ITEM.exec(lines[start]);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const items = [];
  let i = start;
  while (i < lines.length) {
    const m = LIST_ITEM.exec(lines[i]);
    if (m && m[1].length === indent && /\d/.test(m[2]) === ordered) {
      items.push({ lines: [m[3]], contentIndent: m[1].length + m[2].length + 1 });
      i++;
      continue;
    }
    if (!items.length) break;
    const cur = items[items.length - 1];
    if (!lines[i].trim()) {
      // A blank line continues the list only when more indented content follows.
      const next = lines[i + 1];
      const nm = next === undefined ? null : LIST_ITEM.exec(next);
      const sameKind = nm && nm[1].length === indent && /\d/.test(nm[2]) === ordered;
      if (next !== undefined && next.trim() && (next.length - next.trimStart().length > indent || sameKind)) {
        cur.lines.push("");
        i++;
        continue;
      }
      break;
    }
    const lead = lines[i].length - lines[i].trimStart().length;
    if (lead > indent) {
      cur.lines.push(lines[i].slice(Math.min(lead, cur.contentIndent)));
      i++;
      continue;
    }
    if (LIST_ITEM.test(lines[i]) || startsBlock(lines[i], lines[i + 1])) break;
    cur.lines.push(lines[i]); // lazy continuation of the paragraph
    i++;
  }
  const start1 = ordered ? parseInt(first[2], 10) : 1;
  const tag = ordered ? "ol" : "ul";
  const attrs = ordered && start1 !== 1 ? ` start="${start1}"` : "";
  out.push(
    `<${tag}${attrs}>` +
      items
        .map((it) => {
          let body = it.lines;
          while (body.length > 1 && !body[body.length - 1].trim()) body = body.slice(0, -1);
          let task = "";
          const t = /^\[([ xX])\]\s+/.exec(body[0]);
          if (t) {
            task = `<input type="checkbox" disabled${t[1] !== " " ? " checked" : ""}> `;
            body = [body[0].slice(t[0].length), ...body.slice(1)];
          }
          const simple = body.length === 1 || !body.some((l) => l.trim() === "" || startsBlock(l));
          const inner = simple ? renderInline(body.join("\n")) : renderBlocks(body);
          return `<li${task ? ' class="task"' : ""}>${task}${inner}</li>`;
        })
        .join("") +
      `</${tag}>`,
  );
  return i;
}

/** Markdown text → safe HTML. */
export function renderMarkdown(text) {
  return renderBlocks(String(text || "").replace(/\r\n?/g, "\n").split("\n"));
}
