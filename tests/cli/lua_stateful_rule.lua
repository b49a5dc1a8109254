-- counts visited steps and keeps odd values across runs
local visits, tricky = 0, nil
function invoke_at_step(step)
  visits = visits + 1
  log("visit", step, visits)
  if tricky then
    local ok = tricky.nan ~= tricky.nan and tricky.inf == math.huge and tricky.ninf == -math.huge
      and tricky.s == "a\"b\\c\n\0\255z" and tricky.nested[1][2] == 3 and math.type(tricky.i) == "integer"
      and math.type(tricky.f) == "float" and tricky.f == 2.0 and tricky.big == math.mininteger
      and tricky[true] == "yes" and tricky[1.5] == "x"
    log("tricky", ok)
    tricky = nil
  end
  return visits % 5 == 0
end
function save_state()
  return {visits = visits, nan = 0/0, inf = math.huge, ninf = -math.huge, s = "a\"b\\c\n\0\255z",
          nested = {{1, 3}}, i = 7, f = 2.0, big = math.mininteger, [true] = "yes", [1.5] = "x"}
end
function load_state(st)
  visits = st.visits
  st.nested[1][2] = 3
  tricky = st
end
