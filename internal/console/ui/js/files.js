// Files (/v3/files/{network}) and wallet signatures on their CIDs.
import { h, fill, field, table, when } from './dom.js';
import { get, post, del, token, ApiError } from './api.js';
import { action, section, showError } from './ui.js';

export async function filesPage(main, signal) {
  const net = field('Network', { name: 'network' }, 'select');
  net.input.append(h('option', { value: 'public' }, 'public'), h('option', { value: 'private' }, 'private'));
  const list = h('div', { 'aria-live': 'polite' });
  const sigOut = h('div', { role: 'status', 'aria-live': 'polite' });
  const load = async () => {
    const { data } = await get(`/v3/files/${net.input.value}`, { signal });
    fill(list, table('Files', [
      ['Name', f => f.name || ''], ['CID', f => h('code', { class: 'wrap' }, f.cid)], ['Size', f => `${f.size} B`],
      ['Created', f => when(f.created_at)],
      ['', f => h('span', { class: 'buttons' },
        h('button', { type: 'button', class: 'secondary', 'aria-label': `Signature of ${f.name || f.cid}`, onclick: action('Signature', async () => {
          try {
            const { data: s } = await get(`/v3/files/${net.input.value}/signature/${encodeURIComponent(f.cid)}`);
            fill(sigOut, h('p', {}, `Signature on ${s.cid}: `, h('code', { class: 'wrap' }, s.signature)));
          } catch (err) {
            if (err.status === 404) fill(sigOut, h('p', {}, `No signature on ${f.cid}.`));
            else throw err;
          }
          sig.cid.input.value = f.cid;
        }) }, 'Signature'),
        h('button', { type: 'button', class: 'danger', 'aria-label': `Delete ${f.name || f.cid}`, onclick: action('Delete file', async () => {
          if (!confirm(`Delete ${f.name || f.cid}?`)) return;
          await del(`/v3/files/${net.input.value}/${encodeURIComponent(f.id)}`);
          await load();
        }, 'File deleted') }, 'Delete'))],
    ], (data && data.files) || [], 'No files on this network.'));
  };
  net.input.addEventListener('change', () => load().catch(err => showError(err, 'Files')));

  const upload = field('File to upload', { type: 'file', name: 'file' });
  const upForm = h('form', { class: 'row' }, upload.wrap, h('button', { type: 'submit' }, 'Upload'));
  upForm.addEventListener('submit', action('Upload', async () => {
    const file = upload.input.files[0];
    if (!file) throw new Error('Choose a file first.');
    const form = new FormData();
    form.append('file', file);
    form.append('network', net.input.value);
    const resp = await fetch('/v3/files', { method: 'POST', headers: { Authorization: `Bearer ${token.get()}` }, body: form });
    if (!resp.ok) {
      let body = null;
      try { body = await resp.json(); } catch { /* not JSON */ }
      const e = body && body.error;
      throw new ApiError(resp.status, (typeof e === 'string' ? e : e && (e.details || e.reason)) || resp.statusText, body);
    }
    upload.input.value = '';
    await load();
  }, 'Uploaded'));

  const sig = {
    cid: field('CID', { name: 'cid', autocomplete: 'off' }),
    address: field('Wallet address', { name: 'address', autocomplete: 'off' }),
    signature: field('Signature', { name: 'signature', autocomplete: 'off' }),
  };
  const sigForm = h('form', { class: 'row' }, sig.cid.wrap, sig.address.wrap, sig.signature.wrap,
    h('button', { type: 'submit' }, 'Add signature'),
    h('button', { type: 'button', class: 'secondary', onclick: action('Delete signature', async () => {
      await del(`/v3/files/${net.input.value}/signature/${encodeURIComponent(sig.cid.input.value.trim())}`);
      fill(sigOut, h('p', {}, 'Signature deleted.'));
    }, 'Signature deleted') }, 'Delete signature'));
  sigForm.addEventListener('submit', action('Add signature', async () => {
    const { data } = await post(`/v3/files/${net.input.value}/signature/${encodeURIComponent(sig.cid.input.value.trim())}`,
      { address: sig.address.input.value.trim(), signature: sig.signature.input.value.trim() });
    fill(sigOut, h('p', {}, `Signature added on ${data.cid}.`));
  }, 'Signature added'));

  fill(main, h('h1', {}, 'Files and signatures'),
    section('Files', h('div', { class: 'row' }, net.wrap), upForm, list),
    section('Signatures', sigForm, sigOut));
  await load();
}
