// Starts fauxqs (an SQS and SNS emulator, installed by scripts/aws/emulators.sh) on 127.0.0.1 and a free port,
// and prints "listening http://127.0.0.1:PORT" once it accepts requests; it runs until it is killed or its
// standard input closes (the test process that started it is gone). testenv.StartFauxqs runs it as
//
//	FAUXQS_DIR=DIR node --input-type=module -e "$(cat fauxqs.mjs)"
import path from "node:path";
import { pathToFileURL } from "node:url";

const dir = process.env.FAUXQS_DIR;
if (!dir) {
	console.error("set FAUXQS_DIR to the directory scripts/aws/emulators.sh prints");
	process.exit(2);
}
const dist = path.join(dir, "node_modules", "fauxqs", "dist");
const load = (f) => import(pathToFileURL(path.join(dist, f)).href);
const { buildApp } = await load("app.js");
const { SqsStore } = await load("sqs/sqsStore.js");
const { SnsStore } = await load("sns/snsStore.js");
const { S3Store } = await load("s3/s3Store.js");

const app = buildApp({
	logger: false,
	host: "127.0.0.1",
	stores: { sqsStore: new SqsStore(), snsStore: new SnsStore(), s3Store: new S3Store() },
});
const address = await app.listen({ port: 0, host: "127.0.0.1" });
console.log("listening " + address);
process.stdin.on("end", () => process.exit(0));
process.stdin.on("close", () => process.exit(0));
process.stdin.resume();
