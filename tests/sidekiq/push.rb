# Sidekiq's own client: push one FailWhileFlag job per name given as a JSON
# array on ARGV[0], with the 64-bit integer ARGV[1]; prints the jids as a
# JSON object {name: jid}.  SKTEST_IN: schedule them that many seconds from
# now (perform_in); SKTEST_RETRY: their retry budget (default 0: a failure
# goes straight to the dead set).
require "json"
require_relative "jobs"

names = JSON.parse(ARGV[0])
big = Integer(ARGV[1])
worker = FailWhileFlag.set(retry: Integer(ENV.fetch("SKTEST_RETRY", "0")))
jids = names.to_h do |name|
  jid = ENV["SKTEST_IN"] ? worker.perform_in(Float(ENV["SKTEST_IN"]), name, big) : worker.perform_async(name, big)
  [name, jid]
end
puts JSON.generate(jids)
