// Starts kinesalite (a Kinesis Data Streams emulator, installed by scripts/aws/emulators.sh) on 127.0.0.1 and a
// free port, in memory, with streams that become active at once, and prints "listening http://127.0.0.1:PORT";
// it runs until it is killed or its standard input closes. testenv.StartKinesalite runs it as
//
//	KINESALITE_DIR=DIR node -e "$(cat kinesalite.js)"
const path = require("node:path");
const dir = process.env.KINESALITE_DIR;
if (!dir) {
	console.error("set KINESALITE_DIR to the directory scripts/aws/emulators.sh installs kinesalite in");
	process.exit(2);
}
const kinesalite = require(path.join(dir, "node_modules", "kinesalite"));
// kinesalite throws from a request's error handler when a client hangs up mid-request (a publish whose context
// was cancelled), which would end the process: such a request is simply over.
process.on("uncaughtException", (err) => {
	if (err && (err.code === "ECONNRESET" || err.message === "aborted")) {
		return;
	}
	console.error(err);
	process.exit(1);
});
const server = kinesalite({ createStreamMs: 0, deleteStreamMs: 0, updateStreamMs: 0, shardLimit: 100 });
server.listen(0, "127.0.0.1", () => {
	console.log("listening http://127.0.0.1:" + server.address().port);
});
process.stdin.on("end", () => process.exit(0));
process.stdin.on("close", () => process.exit(0));
process.stdin.resume();
