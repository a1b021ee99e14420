// Validates rendered Kubernetes objects against their schemas, offline:
// npm kubernetes-models (core API), @kubernetes-models/prometheus-operator
// and @kubernetes-models/cloudnative-pg, pinned in package-lock.json.
//
//   node tests/deploy/k8s_validate.js rendered.json   (a JSON array of objects)
//
// An object whose kind has no schema here is an error, not a skip.
"use strict";
const fs = require("fs");

function modelPath(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  if (group === "monitoring.coreos.com") {
    return `@kubernetes-models/prometheus-operator/${group}/${version}/${kind}`;
  }
  if (group === "postgresql.cnpg.io") {
    return `@kubernetes-models/cloudnative-pg/${group}/${version}/${kind}`;
  }
  return group ? `kubernetes-models/${group}/${version}/${kind}` : `kubernetes-models/${version}/${kind}`;
}

function main() {
  const objects = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
  let failed = 0;
  for (const obj of objects) {
    const name = `${obj.kind}/${obj.metadata && obj.metadata.name}`;
    let Model;
    try {
      Model = require(modelPath(obj.apiVersion, obj.kind))[obj.kind];
    } catch (e) {
      console.error(`${name}: no schema for ${obj.apiVersion} ${obj.kind}`);
      failed++;
      continue;
    }
    // kustomize wraps long base64 at 76 columns; the API server's decoder
    // (Go's encoding/base64) skips those newlines, the schema's "byte"
    // format does not.
    if (obj.kind === "Secret" && obj.data) {
      for (const k of Object.keys(obj.data)) obj.data[k] = obj.data[k].replace(/\n/g, "");
    }
    try {
      new Model(obj).validate();
    } catch (e) {
      console.error(`${name}: ${e.message}`);
      failed++;
    }
  }
  if (failed) {
    console.error(`${failed} of ${objects.length} objects failed validation`);
    process.exit(1);
  }
  console.log(`${objects.length} objects valid`);
}

main();
