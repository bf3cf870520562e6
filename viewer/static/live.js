// Keeps the parts of a page marked data-live="URL" current while a run writes: every
// data-interval ms it fetches the fragment (rendered and escaped by the server) and swaps it
// in when it changed, until the fragment marks itself final (a finished trial or attempt). The
// pages are complete without this script.
for (const el of document.querySelectorAll("[data-live]")) {
  let last = null;
  const every = Number(el.dataset.interval) || 2000;
  const refresh = async () => {
    let final = false;
    try {
      const response = await fetch(el.dataset.live, { cache: "no-store" });
      if (response.ok) {
        const html = await response.text();
        if (last !== null && html !== last) {
          el.innerHTML = html;
          el.dataset.updates = String(Number(el.dataset.updates || 0) + 1);
        }
        last = html;
        final = el.querySelector("[data-final]") !== null;
      }
    } finally {
      if (!final) setTimeout(refresh, every);
    }
  };
  refresh();
}
