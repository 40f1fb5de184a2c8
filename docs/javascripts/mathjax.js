// MathJax 3 (loaded after this file): TeX for $...$ in pages (pymdownx.arithmatex), and
// AsciiMath for the formulas of the docstrings (``y = f(x)`` in the source; see docsgen/).
// Only elements of class "arithmatex" are typeset, so code blocks are never touched.
window.MathJax = {
  loader: { load: ["input/asciimath"] },
  asciimath: { delimiters: [["`", "`"]] },
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: { ignoreHtmlClass: ".*|", processHtmlClass: "arithmatex" },
};
