// BrowserDrop upload page: protocol v1 reference client.
//
//   GET  config.json              page settings (strings, limits, look)
//   POST upload?path=<a>/<b>/<c>  raw file body, each path segment encodeURIComponent'ed
//   with config.json's "resumable" (README, "Resumable uploads"): POST …&upload=ID, and after a
//   cut HEAD …&upload=ID for the offset, then PATCH …&upload=ID with Upload-Offset and the rest
//
// Plain script, no build step, no external fetches, works under a strict CSP (no inline code).
// File names are only ever written with textContent, never parsed as HTML.
'use strict';

(() => {
  // Every text on the page, by key; config.json's "strings" replaces any of them.
  const DEFAULT_STRINGS = {
    title: 'Upload files',
    subtitle: 'Send files from this computer to your device.',
    dropTitle: 'Drop files or folders here',
    dropHint: 'Folders keep their structure.',
    chooseFiles: 'Choose files',
    chooseFolder: 'Choose folder',
    summaryEmpty: 'No files yet.',
    summary: '{done} of {total} uploaded',
    queued: 'Waiting',
    uploading: 'Uploading',
    uploaded: 'Uploaded',
    failed: 'Failed',
    waitingForDevice: 'Waiting for the device…',
    deviceUnreachable:
      "Can't reach the device. Keep the upload screen open on it; uploads resume on their own.",
    notEnoughSpace: 'Not enough space on the device',
    tooLarge: 'Too large',
    unsupported: 'File type not supported',
    pathConflict: 'Another file or folder you sent has this name',
    skipped: "Skipped because the type isn't supported: {count}",
    retry: 'Retry failed',
    doneHint: "When you're done, confirm on your device to import the files.",
    loadError: "Can't reach the device. Check that its upload screen is still open.",
    folderUnsupported: "This browser can't choose folders here; drag the folder onto the page instead.",
    keepScreenOn: 'Large files take a while: keep this screen on until they are uploaded.',
    iosOriginals:
      'Photos chosen from the photo library arrive as JPEG. To send the originals (HEIC), use Choose files and pick them in Files.',
    unreadable: "This file can't be read any more (moved, deleted or not a file). Choose it again.",
    alsoAt: 'Also at {name}',
  };

  // Error codes of protocol v1 → the reason shown, and whether "Retry failed" may try again.
  const REFUSALS = {
    too_large: { reason: 'tooLarge', retryable: false },
    unsupported_type: { reason: 'unsupported', retryable: false },
    invalid_path: { reason: '', retryable: false },
    insufficient_storage: { reason: 'notEnoughSpace', retryable: true },
    path_conflict: { reason: 'pathConflict', retryable: true },
  };

  const MAX_BACKOFF_SECONDS = 30;
  const MAX_SERVER_ERRORS = 5; // 5xx answers (other than 507) retried automatically per file
  const MAX_DROPPED_CONNECTIONS = 8; // dropped connections per file while the device answers
  const UNREACHABLE_AFTER = 2; // failed reconnection probes before saying "can't reach"
  // Test-only settings, from the page's own address (`?bd-stall-ms=1500&bd-large-bytes=1`), so
  // the browser tests need not wait 20 s for a stall. Nothing else reads the query string.
  const testing = new URLSearchParams(window.location.search);
  const testNumber = (name, min) => {
    const value = Number(testing.get(name));
    return testing.has(name) && Number.isFinite(value) && value >= min ? value : null;
  };
  // An upload whose bytes stopped moving for this long is abandoned and tried again. Every engine
  // tested reports upload progress many times a second while bytes move, so a slow link that still
  // moves is never cut; the time is long enough for a Wi-Fi roam or a brief dead spot.
  const STALL_MS = testNumber('bd-stall-ms', 200) ?? 20000;
  // Once the whole body is out, the device may take a while to answer (it makes the file durable
  // first): that wait is bounded more loosely.
  const ANSWER_MS = Math.max(120000, STALL_MS);
  const PROBE_TIMEOUT_MS = Math.min(10000, STALL_MS); // one reachability check
  // While this many bytes or more are still to send, the page asks for the screen to stay on.
  const LARGE_BYTES = testNumber('bd-large-bytes', 0) ?? 50 * 1000 * 1000;

  const $ = (id) => document.getElementById(id);
  const ui = {
    root: document.documentElement,
    app: $('app'),
    brand: $('brand'),
    drop: $('drop'),
    chooseFiles: $('choose-files'),
    chooseFolder: $('choose-folder'),
    fileInput: $('file-input'),
    folderInput: $('folder-input'),
    folderHint: $('folder-hint'),
    iosHint: $('ios-hint'),
    alsoAt: $('also-at'),
    keepAwake: $('keep-awake'),
    notice: $('notice'),
    noticeText: $('notice-text'),
    panel: $('panel'),
    summary: $('summary'),
    retry: $('retry'),
    overall: $('overall'),
    skipped: $('skipped'),
    list: $('list'),
    done: $('done'),
    live: $('live'),
  };

  const state = {
    ready: false,
    strings: { ...DEFAULT_STRINGS },
    title: null,
    allowed: null, // Set of lowercase extensions, or null for any
    maxSize: null, // bytes, or null for no limit
    concurrency: 3,
    items: [], // every file shown, in the order it was added
    byPath: new Map(),
    queue: [], // items waiting for a slot, ordered by seq
    active: 0,
    seq: 0,
    skipped: 0,
    offline: false, // a connection failed: nothing starts until a probe reaches the device
    backoffLevel: 0, // reset by any successful upload
    probeFailures: 0,
    probeTimer: 0,
    dirty: new Set(),
    frame: 0,
    lastMilestone: 0,
    wasBusy: false,
    wakeLock: null, // a WakeLockSentinel while the screen is kept on
    wakeLockPending: false,
    wakeLockRefused: false, // asked and refused: not asked again until the tab is back in sight
    keepAwake: false, // large files are on their way
    resumable: false, // config.json offers resumable uploads
    resumeLifetimeMs: 0,
    localName: null, // config.json's localName: the device's name on the network, once published
  };

  // ---------------------------------------------------------------- text

  // Natural order, so "2 Chapter" comes before "10 Chapter".
  const byName = new Intl.Collator(undefined, { numeric: true, sensitivity: 'base' });
  let numberFormat = new Intl.NumberFormat('en');
  let decimalFormat = new Intl.NumberFormat('en', { maximumFractionDigits: 1 });
  let percentFormat = new Intl.NumberFormat('en', { style: 'percent' });

  function t(key, values) {
    let text = state.strings[key];
    if (typeof text !== 'string') text = DEFAULT_STRINGS[key] || '';
    if (!values) return text;
    return text.replace(/\{(done|total|count)\}/g, (match, name) =>
      name in values ? numberFormat.format(values[name]) : match,
    );
  }

  function applyStrings() {
    for (const node of document.querySelectorAll('[data-string]')) {
      node.textContent = t(node.dataset.string);
    }
    const heading = t('title');
    document.title = state.title ? `${heading} · ${state.title}` : heading;
  }

  function formatBytes(bytes) {
    const units = ['B', 'KB', 'MB', 'GB', 'TB'];
    let value = bytes;
    let unit = 0;
    while (value >= 1000 && unit < units.length - 1) {
      value /= 1000;
      unit += 1;
    }
    const number = unit === 0 ? numberFormat.format(value) : decimalFormat.format(value);
    return `${number} ${units[unit]}`;
  }

  function announce(text) {
    // Clearing first makes screen readers repeat a message identical to the previous one.
    ui.live.textContent = '';
    window.setTimeout(() => {
      ui.live.textContent = text;
    }, 60);
  }

  // ---------------------------------------------------------------- configuration

  function textDirection(language) {
    try {
      const locale = new Intl.Locale(language);
      const info = typeof locale.getTextInfo === 'function' ? locale.getTextInfo() : locale.textInfo;
      if (info && info.direction) return info.direction;
    } catch (error) {
      // Not a valid tag: fall through to the list below.
    }
    return /^(ar|fa|he|iw|ps|sd|ug|ur|yi|dv|ckb)(-|$)/i.test(language) ? 'rtl' : 'ltr';
  }

  // sRGB channels (0–255) of any CSS colour the browser understands, painted on a 1×1 canvas
  // (named colours, rgb(), hsl(), oklch() alike); a translucent one is taken over white. null
  // when the browser can't read it.
  function channelsOf(color) {
    if (!(window.CSS && CSS.supports('color', color))) return null;
    const canvas = document.createElement('canvas');
    canvas.width = 1;
    canvas.height = 1;
    const context = canvas.getContext('2d', { willReadFrequently: true });
    if (!context) return null;
    context.fillStyle = '#ffffff';
    context.fillRect(0, 0, 1, 1);
    context.fillStyle = color;
    context.fillRect(0, 0, 1, 1);
    const [r, g, b] = context.getImageData(0, 0, 1, 1).data;
    return [r, g, b];
  }

  function relativeLuminance(channels) {
    const [r, g, b] = channels.map((value) => {
      const c = value / 255;
      return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  }

  function contrast(a, b) {
    return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  }

  // The card colours of style.css in light and dark mode, and the text on them: a focus ring in
  // the accent needs 3:1 against the card (WCAG non-text contrast), else it takes the text colour.
  const CARD_LIGHT = relativeLuminance([0xff, 0xff, 0xff]);
  const CARD_DARK = relativeLuminance([0x14, 0x1b, 0x2d]);
  const DARK_TEXT = '#0f1220';

  function applyAccent(color) {
    if (typeof color !== 'string' || !color.trim()) return;
    const value = color.trim();
    const channels = channelsOf(value);
    if (!channels) return;
    const accent = relativeLuminance(channels);
    ui.root.style.setProperty('--accent', value);
    // Text on the accent: whichever of white and near-black contrasts more.
    const onWhite = contrast(accent, 1);
    const onDark = contrast(accent, relativeLuminance([0x0f, 0x12, 0x20]));
    ui.root.style.setProperty('--accent-fg', onWhite >= onDark ? '#ffffff' : DARK_TEXT);
    ui.root.style.setProperty('--focus-light', contrast(accent, CARD_LIGHT) >= 3 ? value : '#111827');
    ui.root.style.setProperty('--focus-dark', contrast(accent, CARD_DARK) >= 3 ? value : '#eef1f8');
  }

  // Only string values of known keys are taken; the rest of the table keeps its English text.
  function stringsFrom(table) {
    const strings = {};
    if (table && typeof table === 'object') {
      for (const [key, value] of Object.entries(table)) {
        const known = Object.prototype.hasOwnProperty.call(DEFAULT_STRINGS, key);
        if (known && typeof value === 'string') strings[key] = value;
      }
    }
    return strings;
  }

  function applyLanguage(language) {
    if (typeof language !== 'string' || !language) return;
    ui.root.lang = language;
    ui.root.dir = textDirection(language);
    try {
      numberFormat = new Intl.NumberFormat(language);
      decimalFormat = new Intl.NumberFormat(language, { maximumFractionDigits: 1 });
      percentFormat = new Intl.NumberFormat(language, { style: 'percent' });
    } catch (error) {
      // Unknown to this browser: keep English number formats.
    }
  }

  // The strings and language of the last config.json read at this address are kept in the
  // browser, so that text shown before (or instead of) config.json, loadError above all, is in the
  // host's language from the second visit on. config.json always wins once it arrives.
  const REMEMBERED = 'browserdrop.page.v1';

  function applyRemembered() {
    try {
      const saved = JSON.parse(window.localStorage.getItem(REMEMBERED) || 'null');
      if (!saved || typeof saved !== 'object') return;
      Object.assign(state.strings, stringsFrom(saved.strings));
      applyLanguage(saved.language);
    } catch (error) {
      // Storage off or unreadable: English until config.json arrives.
    }
  }

  function remember(strings, language) {
    try {
      const saved = { strings, language: typeof language === 'string' ? language : '' };
      window.localStorage.setItem(REMEMBERED, JSON.stringify(saved));
    } catch (error) {
      // Storage off or full: nothing to keep.
    }
  }

  function applyConfig(config) {
    const strings = stringsFrom(config.strings);
    state.strings = { ...DEFAULT_STRINGS, ...strings };
    remember(strings, config.language);
    // A language remembered from an earlier visit is dropped when config.json no longer sets one.
    applyLanguage(typeof config.language === 'string' && config.language ? config.language : 'en');
    if (typeof config.title === 'string' && config.title) {
      state.title = config.title;
      ui.brand.textContent = config.title;
      ui.brand.hidden = false;
    }
    applyAccent(config.accentColor);
    if (Array.isArray(config.allowedExtensions)) {
      state.allowed = new Set(
        config.allowedExtensions.map((e) => String(e).toLowerCase().replace(/^\./, '')),
      );
      // No `accept` on the file input: some systems grey out files whose extension they can't map
      // to a MIME type, which would hide files the device takes. The page filters instead.
    }
    if (Number.isFinite(config.maximumFileSize) && config.maximumFileSize >= 0) {
      state.maxSize = config.maximumFileSize;
    }
    const concurrent = Number(config.maximumConcurrentUploads);
    // Browsers open at most 6 HTTP/1.1 connections per host; more would only wait inside it.
    if (Number.isInteger(concurrent) && concurrent > 0) state.concurrency = Math.min(concurrent, 6);
    if (config.resumable && typeof config.resumable === 'object') {
      state.resumable = true;
      const seconds = Number(config.resumable.expiresAfter);
      state.resumeLifetimeMs = (Number.isFinite(seconds) && seconds > 0 ? seconds : 86400) * 1000;
      forgetExpiredIds();
    }
    applyStrings();
    showLocalName(config.localName);
  }

  // The name the device publishes on the network (config.json's localName, e.g. intake.local), so
  // people can type it next time; the QR code keeps the numeric address, which every phone can
  // open. Not shown to a page that was opened by that name already.
  function showLocalName(name) {
    const valid =
      typeof name === 'string' && /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.local$/i.test(name);
    const here = window.location.hostname.toLowerCase().replace(/\.$/, '');
    state.localName = valid && here !== name.toLowerCase() ? name : null;
    ui.alsoAt.replaceChildren();
    ui.alsoAt.hidden = !state.localName;
    if (!state.localName) return;
    const port = window.location.port;
    const shown = document.createElement('strong');
    shown.textContent = port ? `${state.localName}:${port}` : state.localName;
    const parts = t('alsoAt').split('{name}');
    if (parts.length === 1) {
      ui.alsoAt.append(parts[0], ' ', shown);
    } else {
      ui.alsoAt.append(parts[0], shown, parts.slice(1).join(shown.textContent));
    }
  }

  // The page stays invisible (style.css) until config.json has said which texts to show, so a
  // translated page doesn't flash English first. A failed config.json shows it at once; a slow
  // one (or a script that never ran) after the stylesheet's own delay.
  function reveal() {
    ui.root.dataset.shown = '1';
  }

  async function loadConfig(attempt) {
    try {
      const response = await fetch('config.json', { cache: 'no-store' });
      if (!response.ok) throw new Error(`config.json: HTTP ${response.status}`);
      const config = await response.json();
      if (!config || typeof config !== 'object') throw new Error('config.json: not an object');
      applyConfig(config);
      hideNotice();
      reveal();
      state.ready = true;
      ui.chooseFiles.disabled = false;
      ui.chooseFolder.disabled = false;
      ui.app.setAttribute('aria-busy', 'false');
      ui.root.dataset.ready = '1';
      scheduleRender();
    } catch (error) {
      reveal();
      showNotice(t('loadError'), 'error');
      if (attempt === 0) announce(t('loadError'));
      window.setTimeout(() => loadConfig(attempt + 1), backoffMs(attempt));
    }
  }

  // ---------------------------------------------------------------- resumable ids

  // Each resumable upload is named by 128 random bits (32 lowercase hex digits). The id is kept in
  // localStorage under the file's path, size and lastModified, so the same file picked again after
  // a reload continues where it stopped; it is removed once the upload is stored or refused.
  const UPLOAD_IDS = 'browserdrop.upload.v1:';

  function newUploadId() {
    const bytes = new Uint8Array(16);
    window.crypto.getRandomValues(bytes);
    return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
  }

  function idKey(item) {
    return UPLOAD_IDS + JSON.stringify([item.path, item.file.size, item.file.lastModified]);
  }

  function recallId(item) {
    try {
      const saved = JSON.parse(window.localStorage.getItem(idKey(item)) || 'null');
      if (saved && typeof saved.id === 'string' && /^[0-9a-f]{32}$/.test(saved.id)) return saved.id;
    } catch (error) {
      // Storage off or unreadable: a new id.
    }
    return null;
  }

  function keepId(item) {
    // The key is taken once: a File whose file is gone may report another size or date later.
    item.storedKey = idKey(item);
    try {
      window.localStorage.setItem(item.storedKey, JSON.stringify({ id: item.uploadId, at: Date.now() }));
    } catch (error) {
      // Storage off or full: the upload still resumes while the page stays open.
    }
  }

  function forgetId(item) {
    if (item.uploadId && item.storedKey) {
      try {
        const saved = JSON.parse(window.localStorage.getItem(item.storedKey) || 'null');
        if (saved && saved.id === item.uploadId) window.localStorage.removeItem(item.storedKey);
      } catch (error) {
        // Nothing to remove.
      }
    }
    item.uploadId = null;
    item.storedKey = null;
    item.offset = 0;
    item.needsCheck = false;
  }

  // Ids older than the device keeps a paused upload are of no use: dropped when config.json arrives.
  function forgetExpiredIds() {
    try {
      const now = Date.now();
      for (let i = window.localStorage.length - 1; i >= 0; i -= 1) {
        const key = window.localStorage.key(i);
        if (!key || !key.startsWith(UPLOAD_IDS)) continue;
        let saved = null;
        try {
          saved = JSON.parse(window.localStorage.getItem(key) || 'null');
        } catch (error) {
          saved = null;
        }
        if (!saved || !(now - Number(saved.at) < state.resumeLifetimeMs)) {
          window.localStorage.removeItem(key);
        }
      }
    } catch (error) {
      // Storage off.
    }
  }

  // ---------------------------------------------------------------- notices

  function showNotice(text, kind) {
    ui.noticeText.textContent = text;
    ui.notice.dataset.kind = kind;
    ui.notice.hidden = false;
  }

  function hideNotice() {
    ui.notice.hidden = true;
    ui.noticeText.textContent = '';
  }

  // ---------------------------------------------------------------- adding files

  function cleanPath(path) {
    const segments = String(path).split('/').filter((s) => s !== '');
    if (segments.length === 0) return null;
    // Hidden files and folders (.DS_Store, .git) are left out silently; the server refuses them.
    if (segments.some((s) => s.startsWith('.'))) return null;
    return segments.join('/');
  }

  function extensionOf(path) {
    const name = path.slice(path.lastIndexOf('/') + 1);
    const dot = name.lastIndexOf('.');
    return dot > 0 ? name.slice(dot + 1).toLowerCase() : '';
  }

  // Takes [{file, path}] and queues what may be sent. Returns how many rows were added or reset.
  function addFiles(candidates) {
    let added = 0;
    candidates.sort((a, b) => byName.compare(a.path, b.path));
    for (const { file, path } of candidates) {
      const clean = cleanPath(path);
      if (!clean) continue;
      if (state.allowed && !state.allowed.has(extensionOf(clean))) {
        state.skipped += 1;
        continue;
      }
      let item = state.byPath.get(clean);
      if (item) {
        // Already waiting or on its way: keep the one in the list.
        if (item.state === 'queued' || item.state === 'uploading') continue;
        if (item.file !== file) {
          // Another pick: its own stored id (if any) is looked up when it is sent.
          item.uploadId = null;
          item.storedKey = null;
          item.offset = 0;
          item.needsCheck = false;
        }
        item.file = file;
        item.size = file.size;
      } else {
        item = {
          seq: ++state.seq,
          path: clean,
          file,
          size: file.size,
          state: 'queued',
          loaded: 0,
          reason: '',
          retryable: false,
          xhr: null,
          serverErrors: 0,
          droppedConnections: 0,
          lastProgress: 0,
          uploadId: null, // resumable uploads: the id, the offset known on the device, and
          offset: 0, // whether to ask the device for it (HEAD) before sending more
          needsCheck: false,
          lostUnanswered: false, // the last request got no answer: HEAD may tell its refusal
          storedKey: null, // where its id is kept in localStorage
          el: null,
        };
        state.items.push(item);
        state.byPath.set(clean, item);
        ui.list.append(buildRow(item));
      }
      added += 1;
      if (state.maxSize !== null && file.size > state.maxSize) {
        fail(item, 'tooLarge', false);
      } else {
        enqueue(item);
      }
    }
    pump();
    scheduleRender();
    return added;
  }

  function fromFileList(files, useRelativePath) {
    return Array.from(files, (file) => ({
      file,
      path: (useRelativePath && file.webkitRelativePath) || file.name,
    }));
  }

  function readEntries(reader) {
    return new Promise((resolve) => reader.readEntries(resolve, () => resolve([])));
  }

  function fileOf(entry) {
    return new Promise((resolve) => entry.file(resolve, () => resolve(null)));
  }

  // Walks dropped entries depth-first; adds files in batches so a big folder shows up as it is read.
  async function walkEntries(entries) {
    let batch = [];
    const flush = () => {
      if (batch.length) addFiles(batch);
      batch = [];
    };
    const visit = async (entry) => {
      if (entry.name.startsWith('.')) return;
      if (entry.isFile) {
        const file = await fileOf(entry);
        if (file) batch.push({ file, path: entry.fullPath.replace(/^\/+/, '') || file.name });
        if (batch.length >= 100) flush();
      } else if (entry.isDirectory) {
        const reader = entry.createReader();
        // readEntries hands out a directory in chunks (100 in Chromium) until it returns none.
        for (;;) {
          const children = await readEntries(reader);
          if (children.length === 0) break;
          children.sort((a, b) => byName.compare(a.name, b.name));
          for (const child of children) await visit(child);
        }
      }
    };
    for (const entry of entries) await visit(entry);
    flush();
  }

  function handleDrop(dataTransfer) {
    if (!dataTransfer) return;
    const entries = [];
    const loose = [];
    const items = dataTransfer.items ? Array.from(dataTransfer.items) : [];
    // Entries must be taken synchronously, while the drop event is being dispatched.
    for (const item of items) {
      if (item.kind !== 'file') continue;
      const entry = typeof item.webkitGetAsEntry === 'function' ? item.webkitGetAsEntry() : null;
      if (entry) {
        entries.push(entry);
      } else {
        const file = item.getAsFile();
        if (file) loose.push({ file, path: file.name });
      }
    }
    // Only browsers without DataTransfer.items get here. Elsewhere dataTransfer.files also lists
    // each dropped folder as a pseudo-file, which must never be uploaded.
    if (items.length === 0 && dataTransfer.files) loose.push(...fromFileList(dataTransfer.files));
    const before = state.items.length;
    const skippedBefore = state.skipped;
    if (loose.length) addFiles(loose);
    walkEntries(entries).then(() => afterAdding(before, skippedBefore));
  }

  function afterAdding(before, skippedBefore) {
    scheduleRender();
    if (state.items.length !== before || state.skipped !== skippedBefore) {
      const counts = tally();
      const parts = [t('summary', { done: counts.uploaded, total: state.items.length })];
      if (state.skipped !== skippedBefore) parts.push(t('skipped', { count: state.skipped }));
      announce(parts.join('. '));
    }
  }

  function chosen(input, useRelativePath) {
    const before = state.items.length;
    const skippedBefore = state.skipped;
    addFiles(fromFileList(input.files, useRelativePath));
    input.value = ''; // choosing the same files again fires "change" again
    afterAdding(before, skippedBefore);
  }

  // A folder chosen through the folder input comes with each file's path inside it. Some engines
  // offer the input but can't pick a folder: WebKitGTK's chooser returns loose files, and a folder
  // forced into it arrives as one 0-byte file named after the folder. Neither is uploaded; the
  // page says to drag the folder instead, and stops offering the button.
  function chosenFolder(input) {
    const files = Array.from(input.files || []);
    const inFolder = files.filter((file) => (file.webkitRelativePath || '').includes('/'));
    if (files.length > 0 && inFolder.length === 0) {
      input.value = '';
      folderPickUnavailable(true);
      return;
    }
    const before = state.items.length;
    const skippedBefore = state.skipped;
    addFiles(inFolder.map((file) => ({ file, path: file.webkitRelativePath })));
    input.value = '';
    afterAdding(before, skippedBefore);
  }

  function folderPickUnavailable(say) {
    ui.chooseFolder.hidden = true;
    if (say) {
      ui.folderHint.hidden = false;
      announce(t('folderUnsupported'));
    }
  }

  // ---------------------------------------------------------------- queue

  function enqueue(item) {
    item.state = 'queued';
    // A resumable upload keeps what it sent: its bar never goes back.
    if (!state.resumable || !item.uploadId) item.loaded = 0;
    item.reason = '';
    item.retryable = false;
    // Keep the order files were added in, also when a cut-off upload goes back in line.
    let low = 0;
    let high = state.queue.length;
    while (low < high) {
      const mid = (low + high) >> 1;
      if (state.queue[mid].seq < item.seq) low = mid + 1;
      else high = mid;
    }
    state.queue.splice(low, 0, item);
    markDirty(item);
  }

  function fail(item, reason, retryable) {
    item.state = 'failed';
    item.reason = reason;
    item.retryable = retryable;
    item.loaded = 0;
    markDirty(item);
  }

  function pump() {
    if (!state.ready || state.offline) return;
    while (state.active < state.concurrency && state.queue.length) {
      const item = state.queue.shift();
      if (item.state === 'queued') send(item);
    }
  }

  function encodePath(path) {
    return path.split('/').map(encodeURIComponent).join('/');
  }

  function send(item) {
    item.state = 'uploading';
    item.bodySent = false;
    item.lastProgress = Date.now();
    state.active += 1;
    if (!state.resumable) {
      item.loaded = 0;
      markDirty(item);
      transmit(item, 'POST', 0);
      return;
    }
    markDirty(item);
    // While the page checks the file and asks the device, a ticket holds the slot; the stall
    // check aborts it like a request.
    const controller = new AbortController();
    const ticket = { abort: () => controller.abort(), signal: controller.signal };
    item.xhr = ticket;
    prepare(item, ticket);
  }

  function uploadUrl(item) {
    let url = 'upload?path=' + encodePath(item.path);
    if (item.uploadId) url += '&upload=' + item.uploadId;
    return url;
  }

  // One byte at the offset is read: a file moved, deleted or that is a folder fails here, with a
  // message of its own, instead of looking like a lost device. Nothing more is read into memory.
  async function readable(file, offset) {
    if (file.size === 0) return true;
    try {
      const start = Math.min(offset, file.size - 1);
      await file.slice(start, start + 1).arrayBuffer();
      return true;
    } catch (error) {
      return false;
    }
  }

  function startOver(item) {
    forgetId(item);
    item.uploadId = newUploadId();
    item.loaded = 0;
    keepId(item);
  }

  async function prepare(item, ticket) {
    const live = () => item.xhr === ticket;
    if (!item.uploadId) {
      const stored = recallId(item);
      if (stored) {
        item.uploadId = stored;
        item.storedKey = idKey(item);
        item.needsCheck = true; // picked again after a reload: ask where it stands
      } else {
        startOver(item);
      }
    }
    const ok = await readable(item.file, item.needsCheck ? 0 : item.offset);
    if (!live()) return;
    if (!ok) {
      release(item, ticket);
      forgetId(item);
      fail(item, 'unreadable', false);
      pump();
      scheduleRender();
      return;
    }
    if (item.needsCheck) {
      let response;
      try {
        response = await fetch(uploadUrl(item), { method: 'HEAD', cache: 'no-store', signal: ticket.signal });
      } catch (error) {
        if (live()) connectionLost(item, ticket);
        return;
      }
      if (!live()) return;
      const offset = Number(response.headers.get('Upload-Offset'));
      const length = Number(response.headers.get('Upload-Length'));
      // The refusal of its last request, which this browser may not have read: Firefox and
      // WebKit read an answer only after sending the whole body, so a large body refused before
      // it was read (507, 409) reached them as a dropped connection.
      // Only after a lost connection: an answer this page did read is told again otherwise.
      const told = item.lostUnanswered ? response.headers.get('Upload-Refusal') || '' : '';
      item.lostUnanswered = false;
      const refused = Object.prototype.hasOwnProperty.call(REFUSALS, told) ? REFUSALS[told] : null;
      const refuse = (refusal, onDevice) => {
        release(item, ticket);
        item.droppedConnections = 0;
        if (onDevice && refusal.retryable) item.needsCheck = true;
        else forgetId(item);
        fail(item, refusal.reason, refusal.retryable);
        pump();
        scheduleRender();
      };
      if (response.status === 204 && Number.isInteger(offset) && offset >= 0 &&
          offset <= item.size && length === item.size) {
        item.needsCheck = false;
        item.offset = offset;
        item.loaded = Math.max(item.loaded, offset);
        if (offset === item.size) {
          // Stored already; only its answer was lost.
          release(item, ticket);
          uploaded(item);
          pump();
          scheduleRender();
          return;
        }
        if (refused) {
          refuse(refused, true); // paused on the device: a retry asks again where it stands
          return;
        }
        if (response.headers.get('Upload-Space') === 'insufficient') {
          // The rest doesn't fit on the device now (every engine learns it here: Firefox and
          // WebKit see a PATCH refused with 507 as a dropped connection). What arrived stays;
          // Retry asks again.
          refuse(REFUSALS.insufficient_storage, true);
          return;
        }
        transmit(item, 'PATCH', offset);
        return;
      }
      if (response.status >= 500) {
        release(item, ticket);
        serverError(item);
        pump();
        scheduleRender();
        return;
      }
      if (refused && response.status === 404) {
        refuse(refused, false); // nothing of it on the device
        return;
      }
      startOver(item); // unknown, expired or another path's: from the first byte, with a new id
    }
    transmit(item, 'POST', 0);
  }

  function transmit(item, method, offset) {
    const xhr = new XMLHttpRequest();
    item.xhr = xhr;
    item.lastProgress = Date.now();
    xhr.open(method, uploadUrl(item));
    if (method === 'PATCH') xhr.setRequestHeader('Upload-Offset', String(offset));
    xhr.upload.onprogress = (event) => {
      if (item.xhr !== xhr) return;
      const loaded = Math.min(offset + event.loaded, item.size);
      item.loaded = state.resumable ? Math.max(item.loaded, loaded) : loaded;
      item.lastProgress = Date.now();
      markDirty(item);
    };
    xhr.upload.onload = () => {
      if (item.xhr !== xhr) return;
      item.bodySent = true;
      item.lastProgress = Date.now();
    };
    xhr.onload = () => answered(item, xhr);
    xhr.onerror = () => connectionLost(item, xhr);
    xhr.ontimeout = () => connectionLost(item, xhr);
    // The File (or the rest of it, a slice) is streamed from disk by the browser: nothing is read
    // into memory here.
    xhr.send(method === 'PATCH' ? item.file.slice(offset) : item.file);
  }

  function uploaded(item) {
    item.state = 'uploaded';
    item.loaded = item.size;
    item.droppedConnections = 0;
    state.backoffLevel = 0;
    forgetId(item);
    markDirty(item);
  }

  function release(item, xhr) {
    if (item.xhr !== xhr) return false; // a late event from an attempt already given up
    item.xhr = null;
    state.active -= 1;
    return true;
  }

  function answered(item, xhr) {
    if (!release(item, xhr)) return;
    item.lostUnanswered = false;
    const status = xhr.status;
    if (status === 0) {
      item.lostUnanswered = true;
      connectionLost(item, null);
      return;
    }
    if (status >= 200 && status < 300) {
      uploaded(item);
    } else {
      let code = '';
      try {
        code = String(JSON.parse(xhr.responseText).error || '');
      } catch (error) {
        // Not JSON (a proxy's page, perhaps): go by the status alone.
      }
      if (state.resumable && item.uploadId && RESUME_ANSWERS[code]) {
        RESUME_ANSWERS[code](item);
        pump();
        scheduleRender();
        return;
      }
      if (!code && status === 413) code = 'too_large';
      if (!code && status === 507) code = 'insufficient_storage';
      if (!code && status === 409) code = 'path_conflict';
      const refusal = REFUSALS[code];
      if (refusal) {
        if (refusal.retryable && item.uploadId) {
          // Refused before its body (no space now, a name in the way): the device may still keep
          // what arrived earlier, so the retry asks where the upload stands instead of sending
          // it all again under a new id.
          item.needsCheck = true;
        } else {
          forgetId(item); // a final refusal: the device keeps nothing of it
        }
        fail(item, refusal.reason, refusal.retryable);
      } else if (status >= 500) {
        serverError(item);
      } else {
        if (item.uploadId) item.needsCheck = true;
        fail(item, '', true);
      }
    }
    pump();
    scheduleRender();
  }

  // A hiccup on the device (or a proxy in between): try again a few times on our own.
  function serverError(item) {
    if (item.uploadId) item.needsCheck = true; // it may hold some of the bytes: ask first
    item.serverErrors += 1;
    if (item.serverErrors < MAX_SERVER_ERRORS) {
      item.state = 'queued';
      if (!state.resumable || !item.uploadId) item.loaded = 0;
      markDirty(item);
      window.setTimeout(() => {
        if (item.state === 'queued' && !state.queue.includes(item)) {
          enqueue(item);
          pump();
        }
      }, backoffMs(item.serverErrors - 1));
    } else {
      fail(item, '', true);
    }
  }

  // Answers of the resumable extension that are no refusal of the file: the page asks again
  // where the upload stands (offset_mismatch), or starts it over under a new id (the device no
  // longer knows it, or knows it for another path).
  const RESUME_ANSWERS = {
    offset_mismatch: (item) => {
      item.needsCheck = true;
      item.serverErrors += 1; // bounded like 5xx answers, so two tabs can't loop forever
      if (item.serverErrors < MAX_SERVER_ERRORS) enqueue(item);
      else fail(item, '', true);
    },
    unknown_upload: (item) => {
      forgetId(item);
      item.loaded = 0;
      enqueue(item);
    },
    upload_mismatch: (item) => {
      forgetId(item);
      item.loaded = 0;
      enqueue(item);
    },
    invalid_upload_id: (item) => {
      forgetId(item);
      item.loaded = 0;
      enqueue(item);
    },
  };

  // The request never got an answer: the device went away, suspended its server, or the network
  // dropped. The file goes back in line and uploads pause until the device answers again.
  function connectionLost(item, xhr) {
    if (xhr && !release(item, xhr)) return;
    // An upload request lost (not a HEAD): its refusal, if any, was not read.
    if (xhr instanceof XMLHttpRequest) item.lostUnanswered = true;
    // Resumable: the device kept what arrived; ask it where to continue before sending more.
    if (item.uploadId) item.needsCheck = true;
    item.droppedConnections += 1;
    if (item.droppedConnections >= MAX_DROPPED_CONNECTIONS) {
      fail(item, '', true);
    } else {
      enqueue(item);
    }
    goOffline();
    scheduleRender();
  }

  function backoffMs(level) {
    return Math.min(MAX_BACKOFF_SECONDS, 2 ** Math.min(level, 10)) * 1000;
  }

  function goOffline() {
    if (state.offline) return;
    state.offline = true;
    state.probeFailures = 0;
    showNotice(t('waitingForDevice'), 'waiting');
    announce(t('waitingForDevice'));
    scheduleProbe(backoffMs(state.backoffLevel));
    state.backoffLevel += 1;
  }

  function scheduleProbe(delay) {
    window.clearTimeout(state.probeTimer);
    state.probeTimer = window.setTimeout(probe, delay);
  }

  // Asks for config.json: any answer means the device is listening again.
  async function probe() {
    window.clearTimeout(state.probeTimer);
    if (!state.offline) return;
    const controller = new AbortController();
    const timer = window.setTimeout(() => controller.abort(), PROBE_TIMEOUT_MS);
    let reachable = false;
    try {
      const response = await fetch('config.json', { cache: 'no-store', signal: controller.signal });
      reachable = response.ok;
    } catch (error) {
      reachable = false;
    } finally {
      window.clearTimeout(timer);
    }
    if (!state.offline) return;
    if (reachable) {
      state.offline = false;
      hideNotice();
      const counts = tally();
      announce(t('summary', { done: counts.uploaded, total: state.items.length }));
      pump();
      scheduleRender();
      return;
    }
    state.probeFailures += 1;
    if (state.probeFailures === UNREACHABLE_AFTER) {
      showNotice(t('deviceUnreachable'), 'error');
      announce(t('deviceUnreachable'));
    }
    scheduleProbe(backoffMs(state.backoffLevel));
    state.backoffLevel += 1;
  }

  function retryFailed() {
    for (const item of state.items) {
      if (item.state === 'failed' && item.retryable) {
        item.serverErrors = 0;
        item.droppedConnections = 0;
        enqueue(item);
      }
    }
    if (state.offline) probe();
    pump();
    scheduleRender();
  }

  // Uploads whose bytes stopped moving (a laptop lid closed on the device, a Wi-Fi roam, a dead
  // spot) are abandoned: the file goes back in line, the page shows waitingForDevice and checks
  // for the device, and sends it again once it answers. Slow but moving uploads are left alone.
  function stalled(item, now) {
    if (item.state !== 'uploading' || !item.xhr) return false;
    // A resumable upload may show the whole file as sent while the device holds less (bytes
    // lost in flight at a cut): only its own request's body counts there.
    const sent = state.resumable ? item.bodySent : item.bodySent || item.loaded >= item.size;
    const limit = sent ? ANSWER_MS : STALL_MS;
    return now - item.lastProgress > limit;
  }

  function abandon(item) {
    const xhr = item.xhr;
    release(item, xhr);
    xhr.abort();
    if (xhr instanceof XMLHttpRequest) item.lostUnanswered = true;
    // With resumable uploads the device keeps the bytes it holds, and the page asks for the
    // offset (HEAD) before sending the rest; in plain v1 the file starts again from its first byte.
    connectionLost(item, null);
  }

  function checkStalls() {
    const now = Date.now();
    for (const item of state.items) if (stalled(item, now)) abandon(item);
  }

  window.setInterval(checkStalls, Math.min(1000, Math.max(100, STALL_MS / 4)));

  // Back in sight after the tab was hidden (a phone's screen locked, another app in front): its
  // timers may have been held back, so the time away does not count against running uploads;
  // waiting files start, a lost device is checked at once, and the screen is kept on again.
  function backInSight() {
    const now = Date.now();
    for (const item of state.items) {
      if (item.state !== 'uploading') continue;
      // A resumable upload whose bytes stood still while hidden is given up at once and resumed
      // from where the device stands: cheaper than waiting out the stall time on a dead socket.
      if (state.resumable && item.uploadId && item.xhr instanceof XMLHttpRequest &&
          now - item.lastProgress > Math.min(STALL_MS, 2000)) {
        abandon(item);
      } else {
        item.lastProgress = now;
      }
    }
    state.wakeLockRefused = false;
    if (state.offline) probe();
    else pump();
    scheduleRender();
  }

  // ---------------------------------------------------------------- keeping the screen on

  // While large files are on their way, a phone that locks its screen may stop sending. The page
  // asks for a screen wake lock (only in a secure context: HTTPS or this very computer, so not on
  // a LAN address over plain HTTP) and otherwise asks the person to keep the screen on.
  function keepAwake(wanted) {
    const lockable = 'wakeLock' in navigator && window.isSecureContext;
    state.keepAwake = wanted;
    if (wanted && lockable && !state.wakeLock && !state.wakeLockPending &&
        !state.wakeLockRefused && document.visibilityState === 'visible') {
      state.wakeLockPending = true;
      navigator.wakeLock.request('screen').then(
        (sentinel) => {
          state.wakeLockPending = false;
          state.wakeLock = sentinel;
          sentinel.addEventListener('release', () => {
            if (state.wakeLock === sentinel) state.wakeLock = null;
            scheduleRender();
          });
          if (!state.keepAwake) releaseWakeLock();
          scheduleRender();
        },
        () => {
          state.wakeLockPending = false;
          state.wakeLockRefused = true;
          scheduleRender();
        },
      );
    } else if (!wanted) {
      releaseWakeLock();
    }
    // For the tests: held, asking, wanted (and not held: the hint says to keep the screen on), off.
    let lock = 'off';
    if (state.wakeLock) lock = 'held';
    else if (wanted) lock = state.wakeLockPending ? 'asking' : 'wanted';
    ui.root.dataset.wakeLock = lock;
    ui.keepAwake.hidden = lock !== 'wanted';
  }

  function releaseWakeLock() {
    const sentinel = state.wakeLock;
    state.wakeLock = null;
    if (sentinel) sentinel.release().catch(() => {});
  }

  // ---------------------------------------------------------------- rendering

  function buildRow(item) {
    const row = document.createElement('li');
    row.className = 'item';
    row.dataset.path = item.path;

    const icon = document.createElement('span');
    icon.className = 'item-icon';
    icon.setAttribute('aria-hidden', 'true');

    const body = document.createElement('div');
    body.className = 'item-body';

    const top = document.createElement('div');
    top.className = 'item-top';
    const name = document.createElement('span');
    name.className = 'item-name';
    name.title = item.path;
    const slash = item.path.lastIndexOf('/');
    if (slash >= 0) {
      const folder = document.createElement('span');
      folder.className = 'item-folder';
      folder.textContent = item.path.slice(0, slash + 1);
      name.append(folder);
    }
    const base = document.createElement('span');
    base.className = 'item-base';
    base.textContent = item.path.slice(slash + 1);
    name.append(base);
    const stateLabel = document.createElement('span');
    stateLabel.className = 'item-state';
    top.append(name, stateLabel);

    const bar = document.createElement('div');
    bar.className = 'bar';
    bar.setAttribute('role', 'progressbar');
    bar.setAttribute('aria-label', item.path);
    bar.setAttribute('aria-valuemin', '0');
    bar.setAttribute('aria-valuemax', '100');
    const fill = document.createElement('div');
    fill.className = 'fill';
    bar.append(fill);

    const meta = document.createElement('div');
    meta.className = 'item-meta';
    const size = document.createElement('span');
    size.className = 'item-size';
    const reason = document.createElement('span');
    reason.className = 'item-reason';
    meta.append(size, reason);

    body.append(top, bar, meta);
    row.append(icon, body);
    item.el = { row, stateLabel, bar, fill, size, reason, shown: '' };
    markDirty(item);
    return row;
  }

  function markDirty(item) {
    state.dirty.add(item);
    scheduleRender();
  }

  function scheduleRender() {
    if (!state.frame) state.frame = window.requestAnimationFrame(render);
  }

  function tally() {
    const counts = { queued: 0, uploading: 0, uploaded: 0, failed: 0, retryable: 0 };
    for (const item of state.items) {
      counts[item.state] += 1;
      if (item.state === 'failed' && item.retryable) counts.retryable += 1;
    }
    return counts;
  }

  function renderItem(item) {
    const el = item.el;
    if (!el) return;
    const fraction = item.size > 0 ? item.loaded / item.size : item.state === 'uploaded' ? 1 : 0;
    el.row.dataset.state = item.state;
    let label = t(item.state);
    if (item.state === 'uploading') label += ` · ${percentFormat.format(Math.floor(fraction * 100) / 100)}`;
    el.stateLabel.textContent = label;
    el.fill.style.setProperty('--p', String(fraction));
    el.bar.setAttribute('aria-valuenow', String(Math.round(fraction * 100)));
    el.size.textContent =
      item.state === 'uploading'
        ? `${formatBytes(item.loaded)} / ${formatBytes(item.size)}`
        : formatBytes(item.size);
    el.reason.textContent = item.state === 'failed' && item.reason ? t(item.reason) : '';
  }

  function render() {
    state.frame = 0;
    for (const item of state.dirty) renderItem(item);
    state.dirty.clear();

    const counts = tally();
    const total = state.items.length;
    ui.summary.textContent =
      total === 0 ? t('summaryEmpty') : t('summary', { done: counts.uploaded, total });

    // Overall progress counts bytes of everything not refused, so one big file moves the bar.
    let sent = 0;
    let size = 0;
    let countable = 0;
    for (const item of state.items) {
      if (item.state === 'failed') continue;
      countable += 1;
      size += item.size;
      sent += item.state === 'uploaded' ? item.size : item.loaded;
    }
    const fraction = size > 0 ? sent / size : countable > 0 ? counts.uploaded / countable : 0;
    ui.overall.hidden = total === 0;
    ui.overall.querySelector('.fill').style.setProperty('--p', String(fraction));
    ui.overall.setAttribute('aria-valuenow', String(Math.round(fraction * 100)));
    ui.overall.dataset.complete = counts.queued + counts.uploading === 0 && total > 0 ? '1' : '0';

    ui.skipped.hidden = state.skipped === 0;
    ui.skipped.textContent = state.skipped ? t('skipped', { count: state.skipped }) : '';
    ui.retry.hidden = counts.retryable === 0;

    const busy = counts.queued + counts.uploading > 0;
    let remaining = 0;
    for (const item of state.items) {
      if (item.state === 'queued' || item.state === 'uploading') remaining += item.size - item.loaded;
    }
    keepAwake(busy && remaining >= LARGE_BYTES);
    ui.done.hidden = busy || counts.uploaded === 0;
    ui.root.dataset.busy = busy ? '1' : '0';
    ui.panel.dataset.empty = total === 0 ? '1' : '0';

    milestones(counts, total, busy);
  }

  // Screen readers hear the summary at each quarter of a large batch, and when all is settled.
  function milestones(counts, total, busy) {
    if (busy) {
      state.wasBusy = true;
      if (total >= 8) {
        const quarter = Math.floor((counts.uploaded / total) * 4);
        if (quarter > state.lastMilestone && quarter < 4) {
          state.lastMilestone = quarter;
          announce(t('summary', { done: counts.uploaded, total }));
        }
      }
    } else if (state.wasBusy) {
      state.wasBusy = false;
      state.lastMilestone = 0;
      const parts = [t('summary', { done: counts.uploaded, total })];
      if (counts.failed) parts.push(`${t('failed')}: ${numberFormat.format(counts.failed)}`);
      if (counts.uploaded) parts.push(t('doneHint'));
      announce(parts.join('. '));
    }
  }

  // ---------------------------------------------------------------- wiring

  ui.chooseFiles.addEventListener('click', () => ui.fileInput.click());
  ui.chooseFolder.addEventListener('click', () => ui.folderInput.click());
  ui.fileInput.addEventListener('change', () => chosen(ui.fileInput, false));
  ui.folderInput.addEventListener('change', () => chosenFolder(ui.folderInput));
  ui.retry.addEventListener('click', retryFailed);
  // Where the folder input can't pick a folder, the button isn't offered. The property says
  // whether an engine knows the attribute, not whether its chooser can return a folder: iOS and
  // iPadOS (whose picker returns files only) and WebKitGTK/WPE on Linux (whose chooser opens as
  // "Select Files") have it too, so they are told apart by name. Any other engine that returns no
  // folder is found out when it does (chosenFolder).
  const userAgent = navigator.userAgent || '';
  const iOS =
    /\b(iPhone|iPad|iPod)\b/.test(userAgent) ||
    (/\bMacintosh\b/.test(userAgent) && navigator.maxTouchPoints > 1);
  const linuxWebKit =
    /AppleWebKit/.test(userAgent) &&
    /\b(X11|Linux)\b/.test(userAgent) &&
    !/Chrome|Chromium|Android|Edg|OPR/.test(userAgent);
  if (!('webkitdirectory' in ui.folderInput) || iOS || linuxWebKit) folderPickUnavailable(false);
  // On iOS the photo library hands over JPEG copies of HEIC photos; the Files picker (Choose
  // files) gives the originals.
  ui.iosHint.hidden = !iOS;

  const carriesFiles = (event) =>
    !!event.dataTransfer && Array.from(event.dataTransfer.types || []).includes('Files');
  let dragDepth = 0;
  const setDragging = (on) => ui.root.classList.toggle('dragging', on);

  document.addEventListener('dragenter', (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    dragDepth += 1;
    setDragging(true);
  });
  document.addEventListener('dragover', (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault(); // without this the browser would open the file instead
    event.dataTransfer.dropEffect = state.ready ? 'copy' : 'none';
  });
  document.addEventListener('dragleave', (event) => {
    if (!carriesFiles(event)) return;
    dragDepth = Math.max(0, dragDepth - 1);
    if (dragDepth === 0) setDragging(false);
  });
  document.addEventListener('drop', (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    dragDepth = 0;
    setDragging(false);
    if (state.ready) handleDrop(event.dataTransfer);
  });

  // Back on the network, or the tab is looked at again: check right away instead of waiting.
  window.addEventListener('online', () => state.offline && probe());
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') backInSight();
  });
  window.addEventListener('pageshow', (event) => {
    if (event.persisted) backInSight();
  });
  window.addEventListener('beforeunload', (event) => {
    if (state.items.some((item) => item.state === 'queued' || item.state === 'uploading')) {
      event.preventDefault();
      event.returnValue = '';
    }
  });

  applyRemembered();
  applyStrings();
  loadConfig(0);
})();
