// MathJax configuration for pymdownx.arithmatex (generic mode). MathJax itself (3.2.2,
// tex-chtml-full: every TeX extension, so nothing is loaded on demand) and its fonts are in
// javascripts/mathjax/, served by the site: the maths renders offline, with no CDN.
// No re-typeset on Material's `document$`: the site does not use instant navigation, and with
// MathJax loaded from the site (before `document$` first emits) clearing MathJax's cache there
// left every formula blank (checked in headless Chromium).
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex"
  }
};
