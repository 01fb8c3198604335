# Sidekiq's own API on the server REDIS_URL names.  ARGV[0]:
#   counts            prints {"dead", "retry", "schedule", "work"} (sizes, as Sidekiq counts them)
#   retry JID         Sidekiq's own SortedEntry#retry of the dead job JID
#   retry_all         Sidekiq's own DeadSet#retry_all
#   hold NAME         Sidekiq's own client pushes HoldUntilReleased(NAME); prints its jid
require "json"
require_relative "jobs"
require "sidekiq/api"

case ARGV[0]
when "counts"
  puts JSON.generate(dead: Sidekiq::DeadSet.new.size, retry: Sidekiq::RetrySet.new.size,
                     schedule: Sidekiq::ScheduledSet.new.size, work: Sidekiq::Queue.new("work").size)
when "retry"
  Sidekiq::DeadSet.new.find_job(ARGV[1]).retry
when "retry_all"
  Sidekiq::DeadSet.new.retry_all
when "hold"
  puts HoldUntilReleased.perform_async(ARGV[1])
else
  abort "unknown command #{ARGV[0]}"
end
