# bench/callgrind.awk: one path's report from two callgrind files of one
# backend each, the short run (W calls) and the long run (W + N calls):
# per call, long minus short, divided by N, so that connection start-up and
# the first calls' planning cancel out.  Used by bench/profile.sh and
# bench/citus.sh --callgrind:
#
#   awk -v n=N -v warm=W -v top=T -v title=... -v path=... -v syms=FILE \
#       -v totals=FILE -f bench/callgrind.awk SHORT LONG
#
# syms: `nm -D --defined-only postgres` sorted (Debian's postgres keeps only
# its exported symbols; a static function is named by the one before it);
# totals: "path instructions" appended, for a summary table.
BEGIN { while ((getline l < syms) > 0) { ns++; split(l, q, " "); sa[ns] = q[1]; sn[ns] = q[3] } }
function named(k,   a, i) {   # an address in postgres: the exported symbol before it
	if (k !~ /^0x[0-9a-f]+.* \[postgres\]$/) return k
	a = substr(k, 3, 16)
	for (i = ns; i > 0; i--) if (sa[i] <= a) return k " (static, after " sn[i] ")"
	return k
}
function nm(s, tab,   id, rest) {   # name compression: "(id) name" once, "(id)" after
	if (s !~ /^\([0-9]+\)/) return s
	id = substr(s, 1, index(s, ")")); rest = substr(s, length(id) + 2)
	if (rest != "") tab[id] = rest
	return tab[id]
}
function base(o) { sub(/.*\//, "", o); return o }
FNR == 1 { files++; sign = (files == 1) ? -1 : 1; ob = ""; cob = ""; fn = ""; incall = 0; delete FN; delete OB }
/^ob=/ { ob = base(nm(substr($0, 4), OB)); next }
/^cob=/ { cob = base(nm(substr($0, 5), OB)); next }
/^fn=/ { f = nm(substr($0, 4), FN); fn = f " [" ob "]"; fname[fn] = f; fobj[fn] = ob; objof[f] = ob; next }
/^cfn=/ { cf = nm(substr($0, 5), FN); next }
/^calls=/ { incall = 1; next }
/^[0-9+*-]/ {
	if (incall) {
		callee = cf " [" (cob != "" ? cob : ob) "]"
		incl[fn] += sign * $2; arc[fname[fn], cf] += sign * $2
		incall = 0; cob = ""
	} else { self[fn] += sign * $2; incl[fn] += sign * $2 }
	next
}
function I(f,   k, s) { s = 0; for (k in incl) if (fname[k] == f) s += incl[k]; return s }
function A(from, to) { return arc[from, to] }
function line(what, v, how) { printf "  %-34s %10.0f  %5.1f%%  %s\n", what, v / n, 100 * v / total, how }
END {
	# the backend alone: the file of a forked backend also holds what
	# the postmaster did before the fork, which differs between the two
	total = I("PostgresMain")
	gucours = 0
	for (k in arc) {
		split(k, pr, SUBSEP)
		if (objof[pr[1]] == "idempotency.so" && (pr[2] == "set_config_option" || pr[2] == "AtEOXact_GUC" || pr[2] == "NewGUCNestLevel"))
			gucours += arc[k]
	}
	printf "\n### %s\n\n", title
	printf "%.0f instructions per call (server backend; %d calls, after %d)\n\n", total / n, n, warm
	printf "%s %.0f\n", path, total / n >> totals
	print "  part (inclusive; parts nest)        instr/call  share  functions"
	line("transaction start + commit", I("StartTransactionCommand") + I("CommitTransactionCommand"), "StartTransactionCommand + CommitTransactionCommand")
	line("parse + analyze (simple query)", I("pg_parse_query") + I("pg_analyze_and_rewrite_fixedparams"), "pg_parse_query + pg_analyze_and_rewrite_fixedparams (BEGIN, COMMIT)")
	line("plan cache + planning", I("GetCachedPlan"), "GetCachedPlan (protocol Bind and SPI)")
	line("  of which planner", I("standard_planner"), "standard_planner (custom plans, replans)")
	line("executor start-up", I("standard_ExecutorStart"), "standard_ExecutorStart (all statements)")
	line("  of which open indexes", I("ExecOpenIndices"), "ExecOpenIndices (index descriptors and IndexInfo, per statement)")
	line("executor shut-down", I("standard_ExecutorEnd"), "standard_ExecutorEnd")
	line("SPI", I("SPI_connect") + I("SPI_finish") + I("SPI_execute_plan") + I("SPI_execute_plan_with_paramlist") + I("SPI_keepplan") + I("SPI_prepare"), "SPI_connect/finish/execute_plan(_with_paramlist)")
	line("GUC save/restore (search_path)", A("fmgr_security_definer", "ProcessGUCArray") + A("fmgr_security_definer", "AtEOXact_GUC") + A("fmgr_security_definer", "NewGUCNestLevel") + gucours, "SET clause (fmgr_security_definer) + set_config_option/AtEOXact_GUC from idempotency.so")
	line("subtransaction", I("BeginInternalSubTransaction") + I("ReleaseCurrentSubTransaction"), "BeginInternalSubTransaction + ReleaseCurrentSubTransaction")
	line("advisory lock itself", I("pg_advisory_xact_lock_int8") + I("pg_try_advisory_xact_lock_int8"), "pg_(try_)advisory_xact_lock_int8 (the lock call alone, not its statement)")
	line("heap insert", I("heap_insert"), "heap_insert (with its WAL record)")
	line("heap update", I("heap_update"), "heap_update (with its WAL record)")
	line("index insert", I("ExecInsertIndexTuples"), "ExecInsertIndexTuples (btree insert, unique checks)")
	line("ON CONFLICT pre-check", I("ExecCheckIndexConstraints"), "ExecCheckIndexConstraints")
	line("WAL insert", I("XLogInsert"), "XLogInsert (all records: heap, index, commit)")
	line("token (nextval)", I("nextval_internal"), "nextval_internal")
	line("jsonb input (the request)", I("jsonb_in"), "jsonb_in")
	line("request hash", I("IdemHashJsonb"), "IdemHashJsonb (canonical text + SHA-256)")
	if (I("distributed_planner") > 0) {
		line("Citus: distributed planner", I("distributed_planner"), "distributed_planner (every statement, ours and the caller's)")
		line("Citus: local execution", I("ExecuteLocalTaskListExtended"), "ExecuteLocalTaskListExtended (a task on a shard of this node)")
		line("  of which deparse", A("ExecuteLocalTaskListExtended", "TaskQueryString"), "the shard query's text")
		line("  of which parse", A("ExecuteLocalTaskListExtended", "ParseQueryString"), "that text parsed and analyzed again")
		line("  of which plan", A("ExecuteLocalTaskListExtended", "planner"), "and planned again")
	}
	ours = 0; for (k in self) if (fobj[k] == "idempotency.so") ours += self[k]
	line("our C code, self", ours, "instructions in idempotency.so itself")
	split("idem_claim idem_complete idem_execute", e, " ")
	for (i = 1; i <= 3; i++) if (I(e[i]) > 0) line("  " e[i] " (inclusive)", I(e[i]), "everything under it")
	m = 0
	for (k in arc) { split(k, pr, SUBSEP); if (objof[pr[1]] == "idempotency.so" && arc[k] > 0.003 * total) { m++; key[m] = pr[1] " -> " pr[2]; val[m] = arc[k] } }
	if (m > 0) print "\n  calls made by idempotency.so (inclusive instr/call, share; the statements run through SPI show under their caller):"
	for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (val[j] > val[i]) { t = val[i]; val[i] = val[j]; val[j] = t; t = key[i]; key[i] = key[j]; key[j] = t }
	for (i = 1; i <= m && i <= 16; i++) printf "  %10.0f  %5.1f%%  %s\n", val[i] / n, 100 * val[i] / total, key[i]
	print "\n  top inclusive functions (instr/call, share; roots above 97% left out):"
	m = 0
	for (k in incl) if (incl[k] < 0.97 * total && incl[k] > 0.005 * total) { m++; key[m] = k; val[m] = incl[k] }
	for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (val[j] > val[i]) { t = val[i]; val[i] = val[j]; val[j] = t; t = key[i]; key[i] = key[j]; key[j] = t }
	for (i = 1; i <= m && i <= top; i++) printf "  %10.0f  %5.1f%%  %s\n", val[i] / n, 100 * val[i] / total, named(key[i])
}
