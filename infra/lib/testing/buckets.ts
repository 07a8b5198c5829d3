/**
 * What the tests ask of every bucket the stack makes, the web console's as
 * much as those of resources.json: private, encrypted, and with no ACLs.
 */
import * as assert from 'node:assert/strict';

/** A bucket's properties: public access blocked, SSE-S3, ACLs off (the bucket owner owns every object). */
export function assertPrivateBucket(p: Record<string, any>): void {
  assert.deepEqual(p.PublicAccessBlockConfiguration, {
    BlockPublicAcls: true,
    BlockPublicPolicy: true,
    IgnorePublicAcls: true,
    RestrictPublicBuckets: true,
  });
  assert.deepEqual(p.BucketEncryption, {
    ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }],
  });
  assert.deepEqual(p.OwnershipControls, { Rules: [{ ObjectOwnership: 'BucketOwnerEnforced' }] });
}
