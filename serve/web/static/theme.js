// The dashboard's theme: the system's (prefers-color-scheme) until the
// person picks one with the toggle, then theirs, remembered in this
// browser. Loaded before the style sheet applies (not deferred), so a dark
// page never flashes light. The one key it keeps is the theme's name: app.js
// keeps nothing in storage (the session is an HttpOnly cookie).
'use strict';

(function () {
  const KEY = 'deputy.theme';
  const root = document.documentElement;
  const dark = window.matchMedia('(prefers-color-scheme: dark)');

  function stored() {
    try {
      const v = localStorage.getItem(KEY);
      return v === 'dark' || v === 'light' ? v : '';
    } catch (e) {
      return ''; // storage refused (a locked-down profile): the system's theme
    }
  }

  // effective is the theme shown: the one picked, else the system's.
  function effective() {
    return root.dataset.theme || (dark.matches ? 'dark' : 'light');
  }

  function label() {
    const b = document.getElementById('theme-toggle');
    if (!b) return;
    const now = effective();
    b.textContent = now === 'dark' ? 'Light' : 'Dark';
    b.setAttribute('aria-pressed', String(now === 'dark'));
    b.title = `Switch to the ${now === 'dark' ? 'light' : 'dark'} theme`;
  }

  function apply(theme) {
    if (theme) root.dataset.theme = theme;
    else delete root.dataset.theme;
    label();
  }

  function toggle() {
    const next = effective() === 'dark' ? 'light' : 'dark';
    try { localStorage.setItem(KEY, next); } catch (e) { /* kept for this page only */ }
    apply(next);
  }

  apply(stored());
  // Following the system while nothing is picked.
  dark.addEventListener('change', label);
  document.addEventListener('DOMContentLoaded', () => {
    label();
    document.getElementById('theme-toggle').addEventListener('click', toggle);
  });
})();
