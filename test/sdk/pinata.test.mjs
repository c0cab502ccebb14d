// The official pinata SDK, unchanged, against agentplane's /v3 API: uploads, file listing,
// EIP-712 wallet signatures made with ethers, and the errors the SDK surfaces.
//
// Environment: AGENTPLANE_URL (base URL of the REST API), AGENTPLANE_TOKEN (a token with
// org:files:write), AGENTPLANE_OTHER_TOKEN (a token of another workspace).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { PinataSDK } from 'pinata'
import { Wallet } from 'ethers'

const base = process.env.AGENTPLANE_URL
assert.ok(base, 'AGENTPLANE_URL is required')
const sdk = (jwt) => new PinataSDK({
  pinataJwt: jwt,
  pinataGateway: 'example.mypinata.cloud',
  endpointUrl: `${base}/v3`,
  uploadUrl: `${base}/v3`
})
const pinata = sdk(process.env.AGENTPLANE_TOKEN)
const stranger = sdk(process.env.AGENTPLANE_OTHER_TOKEN)

const domain = { name: 'Sign Content', version: '1.0.0', chainId: 1 }
const types = { Sign: [{ name: 'address', type: 'address' }, { name: 'cid', type: 'string' }, { name: 'date', type: 'string' }] }
const wallet = new Wallet('0x' + '11'.repeat(32))

async function signFor (upload, signer = wallet) {
  return signer.signTypedData(domain, types, { address: signer.address, cid: upload.cid, date: upload.created_at })
}

test('testAuthentication answers with the whole body', async () => {
  const res = await pinata.testAuthentication()
  assert.match(res.message, /Congratulations/)
})

test('a bad token is an AuthenticationError', async () => {
  await assert.rejects(sdk('not.a.token').testAuthentication(), (err) => {
    assert.equal(err.name, 'AuthenticationError')
    assert.equal(err.statusCode, 401)
    return true
  })
})

test('upload, sign, read, refuse a second signature, delete', async () => {
  const file = new File([`signed by the sdk test ${Date.now()}\n`], 'sdk.txt', { type: 'text/plain' })
  const upload = await pinata.upload.public.file(file).keyvalues({ suite: 'sdk' })
  assert.match(upload.cid, /^bafkrei/)
  assert.equal(upload.network, 'public')
  assert.equal(upload.name, 'sdk.txt')
  assert.equal(upload.mime_type, 'text/plain')
  assert.match(upload.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)

  const signature = await signFor(upload)
  const added = await pinata.signatures.public.add({ cid: upload.cid, signature, address: wallet.address })
  assert.deepEqual(added, { cid: upload.cid, signature })

  const got = await pinata.signatures.public.get(upload.cid)
  assert.deepEqual(got, { cid: upload.cid, signature })

  await assert.rejects(pinata.signatures.public.add({ cid: upload.cid, signature, address: wallet.address }),
    (err) => err.name === 'NetworkError' && err.statusCode === 409)

  assert.equal(await pinata.signatures.public.delete(upload.cid), 'OK')
  await assert.rejects(pinata.signatures.public.get(upload.cid), (err) => err.statusCode === 404)
})

test('a tampered signature or another signer is refused', async () => {
  const upload = await pinata.upload.public.file(new File([`tamper ${Date.now()}`], 't.txt', { type: 'text/plain' }))
  const signature = await signFor(upload)
  const flipped = signature.slice(0, 10) + (signature[10] === '0' ? '1' : '0') + signature.slice(11)
  await assert.rejects(pinata.signatures.public.add({ cid: upload.cid, signature: flipped, address: wallet.address }),
    (err) => err.name === 'NetworkError' && err.statusCode === 400)

  const other = new Wallet('0x' + '22'.repeat(32))
  await assert.rejects(pinata.signatures.public.add({ cid: upload.cid, signature: await signFor(upload, other), address: wallet.address }),
    (err) => err.statusCode === 400)
  await assert.rejects(pinata.signatures.public.get(upload.cid), (err) => err.statusCode === 404)
})

test('files list, get and delete through the SDK', async () => {
  const upload = await pinata.upload.private.file(new File([`private ${Date.now()}`], 'p.txt', { type: 'text/plain' }))
  assert.equal(upload.network, 'private')
  const listed = await pinata.files.private.list().cid(upload.cid)
  assert.equal(listed.files.length, 1)
  assert.equal(listed.files[0].id, upload.id)
  assert.equal(listed.next_page_token, '')

  const all = await pinata.files.private.list().limit(1).all()
  assert.ok(all.some((f) => f.id === upload.id), 'paging with .all() reaches every file')

  const got = await pinata.files.private.get(upload.id)
  assert.equal(got.cid, upload.cid)
  const deleted = await pinata.files.private.delete([upload.id])
  assert.deepEqual(deleted, [{ id: upload.id, status: 'OK' }])
  await assert.rejects(pinata.files.private.get(upload.id), (err) => err.statusCode === 404)
})

test('another workspace sees nothing', async () => {
  const upload = await pinata.upload.public.file(new File([`mine ${Date.now()}`], 'm.txt', { type: 'text/plain' }))
  await pinata.signatures.public.add({ cid: upload.cid, signature: await signFor(upload), address: wallet.address })
  await assert.rejects(stranger.signatures.public.get(upload.cid), (err) => err.statusCode === 404)
  await assert.rejects(stranger.files.public.get(upload.id), (err) => err.statusCode === 404)
  const theirs = await stranger.files.public.list().cid(upload.cid)
  assert.equal(theirs.files.length, 0)
})
